package gpulock

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Each test gets a lock folder of its own, so tests of other packages (and other runs) on this
// host never meet its locks.
func setup(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	t.Setenv("SLURM_JOB_ID", "")
}

// A second holder of one GPU waits until the first gives it back, is told who holds it, and
// another GPU or the other kind of lock is not held up. flock(2) locks belong to an open file,
// so two opens in one process conflict exactly as two processes do.
func TestLockWaitsForTheHolder(t *testing.T) {
	setup(t)
	first, err := Lock(context.Background(), Eval, "cuda:0", nil)
	if err != nil || first == nil {
		t.Fatalf("first lock: %v", err)
	}
	if b, err := os.ReadFile(path(Eval, gpuUnit("0", "cuda:0"))); err != nil || !strings.HasPrefix(string(b), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("lock file says %q (%v), want this process", b, err)
	}
	for _, other := range []struct{ kind, device string }{{Eval, "cuda:1"}, {Worker, "cuda:0"}} {
		h, err := TryLock(other.kind, other.device)
		if err != nil {
			t.Fatalf("%s lock of %s: %v", other.kind, other.device, err)
		}
		h.Release()
	}
	var told *Busy
	got := make(chan error, 1)
	var second *Held
	go func() {
		var err error
		second, err = Lock(context.Background(), Eval, "cuda:0", func(b *Busy) { told = b })
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the second lock was taken while the first was held: %v", err)
	case <-time.After(5 * poll):
	}
	first.Release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second lock was not taken after the first was given back")
	}
	defer second.Release()
	if told == nil || told.GPU != "0" || !strings.Contains(told.Holder, "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("the waiter was told %+v", told)
	}
	if _, err := TryLock(Eval, "cuda:0"); !errors.As(err, new(*Busy)) || !strings.Contains(err.Error(), "GPU 0 (cuda:0)") {
		t.Fatalf("TryLock of a held GPU: %v", err)
	}
}

// A holder that gives the GPU back and asks for it again at once, as a batch's next evaluation
// does, lets a waiter have its turn: without the queue the waiter, trying once a poll, would
// almost never find the microsecond in which the lock is free, and would wait for the batch's end.
func TestLockTakesTurns(t *testing.T) {
	setup(t)
	const rounds = 30
	turns := make(chan int, rounds) // the holder's round during which the waiter got the GPU
	var round atomic.Int32
	go func() {
		time.Sleep(3 * poll) // the holder's loop below is under way
		h, err := Lock(context.Background(), Eval, "cuda:0", nil)
		if err != nil {
			t.Error(err)
		}
		turns <- int(round.Load())
		h.Release()
	}()
	for i := range rounds {
		round.Store(int32(i))
		h, err := Lock(context.Background(), Eval, "cuda:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(poll) // an evaluation
		h.Release()
		select {
		case r := <-turns:
			if r > 10 {
				t.Fatalf("the waiter got the GPU only during the holder's round %d", r)
			}
			return
		default:
		}
	}
	t.Fatalf("the waiter did not get the GPU in %d rounds of the holder", rounds)
}

// A process that finds another already waiting waits behind it without trying the lock, and is
// told who holds the GPU and that someone waits first.
func TestLockBehindAQueuedWaiter(t *testing.T) {
	setup(t)
	h, err := Lock(context.Background(), Eval, "cuda:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan *Held, 1)
	go func() {
		w, _ := Lock(ctx, Eval, "cuda:0", nil)
		first <- w
	}()
	time.Sleep(3 * poll) // the first waiter has queued
	var told *Busy
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*poll)
	defer cancel2()
	if _, err := Lock(ctx2, Eval, "cuda:0", func(b *Busy) { told = b }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the second waiter: %v", err)
	}
	if told == nil || !strings.HasPrefix(told.Holder, "pid "+strconv.Itoa(os.Getpid())) || !strings.HasSuffix(told.Holder, "another process waits for it first") {
		t.Fatalf("the second waiter was told %+v", told)
	}
	h.Release()
	select {
	case w := <-first:
		if w == nil {
			t.Fatal("the first waiter did not get the GPU")
		}
		w.Release()
	case <-time.After(5 * time.Second):
		t.Fatal("the first waiter did not get the GPU after it was given back")
	}
}

// A waiter that stops waiting gives up its place in the queue: the holder's next Lock is not held
// up by it.
func TestLockQueueLeftByACancelledWaiter(t *testing.T) {
	setup(t)
	h, err := Lock(context.Background(), Eval, "cuda:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*poll)
	defer cancel()
	if _, err := Lock(ctx, Eval, "cuda:0", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a waiter whose context ended: %v", err)
	}
	h.Release()
	ctx2, cancel2 := context.WithTimeout(context.Background(), poll/2)
	defer cancel2()
	h, err = Lock(ctx2, Eval, "cuda:0", nil)
	if err != nil {
		t.Fatalf("the GPU is free and nobody waits, yet Lock waited: %v", err)
	}
	h.Release()
}

// A waiter stops when its context ends; the CPU is never locked.
func TestLockCancelAndCPU(t *testing.T) {
	setup(t)
	h, err := TryLock(Eval, "cuda:0")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 3*poll)
	defer cancel()
	if _, err := Lock(ctx, Eval, "cuda:0", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a waiter whose context ended: %v", err)
	}
	for range 2 {
		c, err := Lock(context.Background(), Eval, "cpu", nil)
		if err != nil || c != nil {
			t.Fatalf("cpu: %v %v", c, err)
		}
		c.Release() // a nil Held releases nothing
	}
}

// cuda:N counts within CUDA_VISIBLE_DEVICES, so two processes that see one GPU under different
// numbers meet on one lock; under Slurm, only the processes of one job do.
func TestPhysical(t *testing.T) {
	setup(t)
	t.Setenv("CUDA_VISIBLE_DEVICES", "5, GPU-1a2b")
	for device, want := range map[string]string{"cuda:0": "5", "cuda:1": "GPU-1a2b", "cuda:2": "2"} {
		if got, ok := Physical(device); !ok || got != want {
			t.Errorf("%s: %q, want %q", device, got, want)
		}
	}
	h, err := TryLock(Eval, "cuda:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	if _, err := TryLock(Eval, "cuda:5"); !errors.As(err, new(*Busy)) {
		t.Fatalf("cuda:5 seen without CUDA_VISIBLE_DEVICES is GPU 5, held as cuda:0 of 5,...: %v", err)
	}
	h.Release()
	t.Setenv("SLURM_JOB_ID", "41")
	a, err := TryLock(Eval, "cuda:0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	t.Setenv("SLURM_JOB_ID", "42")
	b, err := TryLock(Eval, "cuda:0")
	if err != nil {
		t.Fatalf("cuda:0 of another Slurm job: %v", err)
	}
	b.Release()
	if _, ok := Physical("cpu"); ok {
		t.Error("cpu is not a GPU")
	}
}

// What an uncontended evaluation pays for its lock: open, flock, the holder's note, unlock.
func BenchmarkLockRelease(b *testing.B) {
	b.Setenv("TMPDIR", b.TempDir())
	b.Setenv("CUDA_VISIBLE_DEVICES", "")
	b.Setenv("SLURM_JOB_ID", "")
	for b.Loop() {
		h, err := Lock(context.Background(), Eval, "cuda:0", nil)
		if err != nil {
			b.Fatal(err)
		}
		h.Release()
	}
}
