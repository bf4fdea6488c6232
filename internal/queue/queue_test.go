package queue

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/kbplatform/kbplatform/sdk"
)

// fakeExec answers every job with a pass, remembering who ran what.
type fakeExec struct {
	name string
	mu   *sync.Mutex
	ran  map[string][]string // job id → workers
	hold time.Duration
}

func (f fakeExec) Run(ctx context.Context, j *Job, _ func(string)) *Reply {
	f.mu.Lock()
	f.ran[j.ID] = append(f.ran[j.ID], f.name)
	f.mu.Unlock()
	select {
	case <-time.After(f.hold):
	case <-ctx.Done():
		return &Reply{Result: &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassInterrupted}}
	}
	return &Reply{Result: &sdk.Result{Verdict: sdk.Pass, Device: j.Device, Task: j.Evaluate.Task}}
}

func startServer(t *testing.T) string {
	t.Helper()
	e, err := StartEmbedded(EmbeddedOptions{StoreDir: filepath.Join(t.TempDir(), "js")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e.URL()
}

func dialT(t *testing.T, url string) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), url, t.Name(), Auth{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func evalJob(kind, task string) *Job {
	return &Job{ID: NewJobID(OpEvaluate, kind, task, "cpu", "k"), Op: OpEvaluate, Kind: kind, Device: DeviceOf(kind),
		Evaluate: &sdk.EvaluateRequest{Task: sdk.Task{ID: task}, Kernel: sdk.Kernel{Hash: "k"}, Device: DeviceOf(kind)}}
}

// Jobs of one kind go to workers of that kind only, spread over them; a worker of another kind
// never receives one.
func TestJobsGoToTheirKindOnly(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	ran := map[string][]string{}
	var wg sync.WaitGroup
	for _, w := range []struct{ name, kind string }{{"cpu-a", "cpu"}, {"cpu-b", "cpu"}, {"h200-a", "h200"}} {
		c := dialT(t, url)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.Serve(ctx, WorkerOptions{Info: WorkerInfo{ID: w.name, Kind: w.kind, Device: "cpu"}},
				fakeExec{name: w.name, mu: &mu, ran: ran, hold: 50 * time.Millisecond})
		}()
	}
	sub := NewSubmitter(dialT(t, url))
	var swg sync.WaitGroup
	replies := make([]*Reply, 8)
	for i := range replies {
		swg.Add(1)
		go func() {
			defer swg.Done()
			r, err := sub.Submit(ctx, evalJob("cpu", "t"), nil)
			if err != nil {
				t.Error(err)
			}
			replies[i] = r
		}()
	}
	swg.Wait()
	by := map[string]int{}
	for _, r := range replies {
		if r == nil || r.Result == nil || r.Result.Verdict != sdk.Pass {
			t.Fatalf("reply %+v", r)
		}
		by[r.Worker]++
	}
	if by["h200-a"] != 0 {
		t.Errorf("the h200 worker ran %d cpu jobs", by["h200-a"])
	}
	if by["cpu-a"] == 0 || by["cpu-b"] == 0 {
		t.Errorf("jobs not spread over the cpu workers: %v", by)
	}
	counts, workers, err := sub.c.KindCounts(ctx, []string{"cpu", "h200", "l40s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(workers) != 3 {
		t.Errorf("%d workers listed, want 3: %+v", len(workers), workers)
	}
	// A job of a kind nobody asked about and no worker has is counted too.
	b, _ := Encode(evalJob("v100", "t"))
	if _, err := sub.c.JS.Publish(ctx, Subject(LaneEval, "v100"), b); err != nil {
		t.Fatal(err)
	}
	counts, _, err = sub.c.KindCounts(ctx, []string{"cpu", "h200", "l40s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 4 {
		t.Errorf("counts %+v: want cpu, h200, l40s and v100", counts)
	}
	want := map[string]Counts{"cpu": {Kind: "cpu", Workers: 2, Done: 8}, "h200": {Kind: "h200", Workers: 1}, "l40s": {Kind: "l40s"},
		"v100": {Kind: "v100", Queued: 1}}
	for _, c := range counts {
		if c != want[c.Kind] {
			t.Errorf("counts %+v, want %+v", c, want[c.Kind])
		}
	}
	cancel()
	wg.Wait()
}

// A job whose worker vanished mid-run (no ack, no heartbeat) is redelivered to another worker
// and judged once; a redelivery that finds the result stored is acked without running.
func TestRedeliveredJobIsJudgedOnce(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	ran := map[string][]string{}
	opts := ConsumerOptions{AckWait: 2 * time.Second, MaxDeliver: 3}

	// The first worker takes the job and then stops answering the server: its context ends
	// mid-job without a nak, as a kill -9 would leave it (the connection is closed too).
	dying := dialT(t, url)
	dctx, die := context.WithCancel(ctx)
	gotIt := make(chan struct{})
	go func() {
		_ = dying.Serve(dctx, WorkerOptions{Info: WorkerInfo{ID: "dying", Kind: "cpu"}, Consumer: opts},
			execFunc(func(ctx context.Context, j *Job) *Reply {
				close(gotIt)
				dying.NC.Close() // gone: no nak, no heartbeat, no result
				<-ctx.Done()
				return &Reply{Result: &sdk.Result{Verdict: sdk.Pass}}
			}))
	}()
	sub := NewSubmitter(dialT(t, url))
	job := evalJob("cpu", "t")
	res := make(chan *Reply, 1)
	go func() {
		r, err := sub.Submit(ctx, job, nil)
		if err != nil {
			t.Error(err)
		}
		res <- r
	}()
	<-gotIt
	die()
	survivor := dialT(t, url)
	go func() {
		_ = survivor.Serve(ctx, WorkerOptions{Info: WorkerInfo{ID: "survivor", Kind: "cpu"}, Consumer: opts},
			fakeExec{name: "survivor", mu: &mu, ran: ran})
	}()
	r := <-res
	if r == nil || r.Worker != "survivor" || r.Deliveries != 2 {
		t.Fatalf("reply %+v: want the survivor's, on delivery 2", r)
	}
	if got := ran[job.ID]; len(got) != 1 {
		t.Errorf("the survivor ran the job %d times", len(got))
	}

	// The same job delivered again (its ack lost) finds its result and is not run again.
	b, _ := Encode(job)
	if _, err := survivor.JS.Publish(ctx, Subject(LaneEval, "cpu"), b); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		counts, _, err := survivor.KindCounts(ctx, []string{"cpu"})
		if err == nil && counts[0].Queued == 0 && counts[0].Running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the repeated job was never taken: %+v %v", counts, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := ran[job.ID]; len(got) != 1 {
		t.Errorf("a delivery of a judged job ran it again: %v", got)
	}
}

// A job that no worker finishes in MaxDeliver deliveries gets an error reply, not an endless wait.
func TestExhaustedJobGetsAnErrorReply(t *testing.T) {
	url := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := dialT(t, url)
	go func() {
		_ = w.Serve(ctx, WorkerOptions{Info: WorkerInfo{ID: "quitter", Kind: "cpu"}, Consumer: ConsumerOptions{AckWait: time.Second, MaxDeliver: 2}},
			execFunc(func(ctx context.Context, j *Job) *Reply {
				return &Reply{Result: &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassInterrupted}} // naks
			}))
	}()
	r, err := NewSubmitter(dialT(t, url)).Submit(ctx, evalJob("cpu", "t"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Error == "" || r.Deliveries != 2 {
		t.Fatalf("reply %+v: want an error after 2 deliveries", r)
	}
}

type execFunc func(ctx context.Context, j *Job) *Reply

func (f execFunc) Run(ctx context.Context, j *Job, _ func(string)) *Reply { return f(ctx, j) }

// Beyond loopback, the embedded server needs credentials, and then refuses clients without them.
func TestEmbeddedAuth(t *testing.T) {
	dir := t.TempDir()
	if _, err := StartEmbedded(EmbeddedOptions{Listen: "0.0.0.0:0", StoreDir: filepath.Join(dir, "a")}); err == nil {
		t.Fatal("an unauthenticated server listening beyond loopback was started")
	}
	auth := Auth{User: "kbp", Password: "s3cret"}
	e, err := StartEmbedded(EmbeddedOptions{Listen: "0.0.0.0:0", StoreDir: filepath.Join(dir, "b"), Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := DialOnce(context.Background(), e.URL(), "anon", Auth{}); err == nil {
		t.Error("an unauthenticated client was let in")
	}
	c, err := Dial(context.Background(), e.URL(), "kbp", auth)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// An nkey seed file serves both sides: the embedded server admits its public key only.
func TestEmbeddedNkey(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	dir := t.TempDir()
	file := filepath.Join(dir, "worker.nk")
	if err := os.WriteFile(file, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	auth := Auth{NkeyFile: file}
	e, err := StartEmbedded(EmbeddedOptions{Listen: "0.0.0.0:0", StoreDir: filepath.Join(dir, "js"), Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c, err := Dial(context.Background(), e.URL(), "nkey", auth)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	otherFile := filepath.Join(dir, "other.nk")
	_ = os.WriteFile(otherFile, otherSeed, 0o600)
	if _, err := DialOnce(context.Background(), e.URL(), "other", Auth{NkeyFile: otherFile}); err == nil {
		t.Error("a client with another nkey was let in")
	}
	if _, err := DialOnce(context.Background(), e.URL(), "anon", Auth{}); err == nil {
		t.Error("an unauthenticated client was let in")
	}
}

// An advisory that comes before Submit records its sequence (every worker handed the job back
// within milliseconds of its publish) still reaches that Submit; advisories for sequences
// nobody tracks are kept only up to a bound.
func TestExhaustedAdvisoryBeforeTrack(t *testing.T) {
	s := NewSubmitter(nil)
	s.exhausted(7, 2)
	lost := make(chan int, 1)
	s.track(7, lost)
	select {
	case n := <-lost:
		if n != 2 {
			t.Errorf("deliveries %d, want 2", n)
		}
	default:
		t.Fatal("an advisory that came before track was lost")
	}
	// After track, advisories go straight to the channel.
	other := make(chan int, 1)
	s.track(8, other)
	s.exhausted(8, 3)
	if n := <-other; n != 3 {
		t.Errorf("deliveries %d, want 3", n)
	}
	for seq := uint64(100); seq < 100+2*maxEarly; seq++ {
		s.exhausted(seq, 1)
	}
	if len(s.early) != maxEarly || len(s.earlyOrder) != maxEarly {
		t.Errorf("kept %d advisories (%d in order), want %d", len(s.early), len(s.earlyOrder), maxEarly)
	}
	if _, ok := s.early[100]; ok {
		t.Error("the oldest untracked advisory was not dropped")
	}
}
