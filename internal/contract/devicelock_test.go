package contract

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Two evaluators that share nothing (two kbplatform commands on one host) take a GPU one at a
// time: the second waits for the first's evaluation to end and says why. takeDevice touches no
// device, so this runs without a GPU.
func TestDeviceLockAcrossEvaluators(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	t.Setenv("SLURM_JOB_ID", "")
	a := newEvaluator(t, nil)
	var mu sync.Mutex
	var said []string
	b, err := New(Options{Python: testPython(t), WorkDir: t.TempDir(), CacheDir: sharedCache, Config: a.Config(), Progress: func(m string) {
		mu.Lock()
		said = append(said, m)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	giveBack, err := a.takeDevice(context.Background(), "cuda:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := b.takeDevice(ctx, "cuda:0"); err == nil {
		t.Fatal("a second evaluator took cuda:0 while the first held it")
	}
	mu.Lock()
	if len(said) != 1 || !strings.Contains(said[0], "cuda:0: waiting for GPU 0, where another process is evaluating (pid ") {
		t.Fatalf("the waiter said %q", said)
	}
	mu.Unlock()
	// Another GPU is free, and once the first gives cuda:0 back the second takes it.
	other, err := b.takeDevice(context.Background(), "cuda:1")
	if err != nil {
		t.Fatal(err)
	}
	other()
	got := make(chan func(), 1)
	go func() {
		g, err := b.takeDevice(context.Background(), "cuda:0")
		if err != nil {
			t.Error(err)
		}
		got <- g
	}()
	time.Sleep(300 * time.Millisecond)
	giveBack()
	select {
	case g := <-got:
		if g != nil {
			g()
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cuda:0 was not taken after the first evaluator gave it back")
	}
	// The slot came back with the lock: the first takes it again at once.
	again, err := a.takeDevice(context.Background(), "cuda:0")
	if err != nil {
		t.Fatal(err)
	}
	again()
}

// A GPU whose lock cannot be taken (a temporary folder that does not exist) is a harness error
// that says why, before any process starts; not an interruption.
func TestDeviceLockUnavailable(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	e := newEvaluator(t, nil)
	res := e.Evaluate(context.Background(), loadTask(t, "scale_relu"), loadKernel(t, "honest_torch"), "cuda:0", nil)
	if res.Verdict != VerdictError || res.ErrorClass != ClassHarness || !strings.Contains(res.Message, "locking GPU 0 (cuda:0)") {
		t.Fatalf("%s %s %q", res.Verdict, res.ErrorClass, res.Message)
	}
	v := e.Validate(context.Background(), loadTask(t, "scale_relu"), "cuda:0")
	if v.OK || len(v.Errors) != 1 || !strings.HasPrefix(v.Errors[0], "locking GPU 0 (cuda:0)") {
		t.Fatalf("validation: %+v", v)
	}
}
