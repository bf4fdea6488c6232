package contract

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSpareProcesses checks that with spares on, an evaluation takes the candidate process an
// earlier one started, that it still gets a process of its own (never one a candidate ran in),
// that a task met for the first time gets the spare reference process started beside them (never
// a candidate's), and that Close ends the spares left over. Each record says where its time went.
func TestSpareProcesses(t *testing.T) {
	e := newEvaluator(t, nil)
	e.opt.Spares = SparesOn
	var spareUsed, refSpareUsed []bool
	progress := func(m string) {
		t.Log(m)
		if strings.HasPrefix(m, "candidate process: a spare") {
			spareUsed[len(spareUsed)-1] = true
		}
		if strings.HasPrefix(m, "reference process: a spare") {
			refSpareUsed[len(refSpareUsed)-1] = true
		}
	}
	e2, err := e.With(e.Config(), progress, nil)
	if err != nil {
		t.Fatal(err)
	}
	e2.opt.Spares = SparesOn
	e2.spareCap = 1 // each role keeps its fixed depth, whatever the host: this test counts spares
	// Two tasks: the second is new, so its reference process comes from the spare.
	first := loadTask(t, "scale_relu")
	second := first
	second.ID, second.Hash = first.ID+"-again", first.Hash+"-again"
	tasks := []Task{first, second}
	k := loadKernel(t, "honest_torch")
	var pids, refSpares []int
	for i, task := range tasks {
		spareUsed, refSpareUsed = append(spareUsed, false), append(refSpareUsed, false)
		res := e2.Evaluate(context.Background(), task, k, "cpu", nil)
		if res.Verdict != Pass {
			t.Fatalf("evaluation %d: %s %s %s\n%s", i, res.Verdict, res.ErrorClass, res.Message, res.Log)
		}
		ph := res.Phases
		if ph == nil || ph.Total <= 0 || len(ph.Trials) != len(res.Trials) || len(res.Trials) < 2*e.Config().Seeds || ph.Timing <= 0 || ph.Rechecks <= 0 || ph.GPUWork <= 0 {
			t.Fatalf("evaluation %d: phases %+v", i, ph)
		}
		if ph.GPUWork >= ph.Total || ph.Rechecks >= ph.Timing || ph.CandidateStart > ph.Total {
			t.Fatalf("evaluation %d: inconsistent phases %+v", i, ph)
		}
		// Each process accounts for its own operations: the reference loaded once, ran its side
		// of each correctness trial inside compare, and its timed calls; neither side's account
		// exceeds the evaluation.
		ro := ph.ReferenceOps
		if ro["load"].Calls != 1 || ro["compare"].Calls < 2*e.Config().Seeds || ro["timed"].Seconds <= 0 || ph.CandidateOps["trial"].Calls < 2*e.Config().Seeds {
			t.Fatalf("evaluation %d: reference ops %+v", i, ph.ReferenceOps)
		}
		for side, ops := range map[string]map[string]WorkerOp{"reference": ph.ReferenceOps, "candidate": ph.CandidateOps} {
			var sum float64
			for _, o := range ops {
				sum += o.Seconds
			}
			if len(ops) == 0 || sum >= ph.Total {
				t.Fatalf("evaluation %d: %s ops %+v sum %.3fs, total %.3fs", i, side, ops, sum, ph.Total)
			}
		}
		e.mu.Lock()
		for key, ss := range e.spares {
			role, _, _ := strings.Cut(key, "\x00")
			if len(ss) != sparesWanted(role) {
				t.Errorf("evaluation %d: %d %s spares, want %d", i, len(ss), role, sparesWanted(role))
			}
			if role == "reference" {
				refSpares = append(refSpares, ss[0].c.p.pid())
			} else {
				pids = append(pids, ss[len(ss)-1].c.p.pid())
			}
		}
		if i == 1 && len(refSpares) > 0 {
			// The second task's reference is the spare seen after the first evaluation.
			if got := e.refs[e.refKey(task, "cpu", "eager")].p.pid(); got != refSpares[0] {
				t.Errorf("the second task's reference is process %d, want the spare %d", got, refSpares[0])
			}
		}
		e.mu.Unlock()
	}
	if spareUsed[0] || !spareUsed[1] {
		t.Fatalf("spare used per evaluation: %v, want [false true]", spareUsed)
	}
	if refSpareUsed[0] || !refSpareUsed[1] {
		t.Fatalf("spare reference used per evaluation: %v, want [false true]", refSpareUsed)
	}
	if len(pids) != 2 || pids[0] == pids[1] {
		t.Fatalf("spares after each evaluation: %v, want two different processes", pids)
	}
	if len(refSpares) != 2 || refSpares[0] == refSpares[1] {
		t.Fatalf("spare references after each evaluation: %v, want two different processes", refSpares)
	}
	for _, p := range refSpares {
		if slices.Contains(pids, p) {
			t.Fatalf("process %d served as a spare candidate and a spare reference", p)
		}
	}
	e.mu.Lock()
	var left []*proc
	for _, ss := range e.spares {
		for _, s := range ss {
			<-s.ready
			left = append(left, s.c.p)
		}
	}
	e.mu.Unlock()
	if len(left) != spareDepth+spareReferences {
		t.Fatalf("%d spares left for a third evaluation, want %d", len(left), spareDepth+spareReferences)
	}
	e.Close()
	for _, p := range left {
		if !waitExited(p, 10*time.Second) {
			t.Fatal("a spare left over still runs after Close")
		}
	}
}

// TestSpareDepthGrows checks that a key whose spare is taken before its imports finished keeps one
// more spare from then on, up to its limit and while the host has memory; that a spare taken
// ready changes nothing; and that the run says so. The slow spare is a real process whose
// readiness the test holds back a second.
func TestSpareDepthGrows(t *testing.T) {
	e := newEvaluator(t, nil)
	var mu sync.Mutex
	var msgs []string
	e2, err := e.With(e.Config(), func(m string) {
		t.Log(m)
		mu.Lock()
		msgs = append(msgs, m)
		mu.Unlock()
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e2.opt.Spares = SparesOn
	e2.spareCap = spareReferences + 1
	ctx := context.Background()
	key, err := e2.workerKey("reference", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	slow := func() *spare {
		c, err := e2.newWorker("reference", "cpu")
		if err != nil {
			t.Fatal(err)
		}
		s := &spare{c: c, ready: make(chan struct{})}
		go func() {
			defer close(s.ready)
			_, s.err = call(ctx, c.p, time.Minute, prepareRequest{})
			time.Sleep(time.Second)
		}()
		return s
	}
	waits := func() (n int, last string) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if strings.HasPrefix(m, "reference process: waited") {
				n, last = n+1, m
			}
		}
		return n, last
	}
	take := func(front *spare, wantDepth, wantWaits int, wantSaid string) {
		t.Helper()
		if front != nil {
			e2.mu.Lock()
			e2.spares[key] = append([]*spare{front}, e2.spares[key]...)
			e2.mu.Unlock()
		}
		c, err := e2.workerProcess(ctx, "reference", "cpu")
		if err != nil {
			t.Fatal(err)
		}
		if front != nil && c != front.c {
			t.Fatal("the evaluation did not get the spare at the front of the queue")
		}
		c.p.close()
		os.RemoveAll(c.dir)
		e2.mu.Lock()
		depth, kept := e2.sparesKept("reference", key), len(e2.spares[key])
		var others []string // keys other than the reference's that grew: none took a late spare
		for k := range e2.spareDepths {
			if k != key {
				others = append(others, k)
			}
		}
		e2.mu.Unlock()
		if depth != wantDepth || kept != wantDepth || len(others) > 0 {
			t.Fatalf("after a take: depth %d, %d spares kept, want %d; other keys grew: %q", depth, kept, wantDepth, others)
		}
		if got, last := waits(); got != wantWaits || !strings.HasSuffix(last, wantSaid) {
			t.Fatalf("%d waits said, want %d; the last %q, want it to end %q", got, wantWaits, last, wantSaid)
		}
	}
	// Taken before it was ready: one more from now on.
	take(slow(), spareReferences+1, 1, "from now on")
	// Again, at the limit: no more.
	take(slow(), spareReferences+1, 2, "(the most this host keeps)")
	// Taken ready: nothing changes and nothing is said.
	e2.mu.Lock()
	front := e2.spares[key][0]
	e2.mu.Unlock()
	<-front.ready
	take(nil, spareReferences+1, 2, "(the most this host keeps)")
	// Below the limit but short of memory (less than a quarter of it available): no more either;
	// with memory again, one more.
	e2.mu.Lock()
	e2.spareCap = spareReferences + 3
	avail := int64(1 << 30)
	e2.memInfo = func(field string) (int64, error) {
		if field == "MemAvailable" {
			return avail, nil
		}
		return 8 << 30, nil
	}
	e2.mu.Unlock()
	take(slow(), spareReferences+1, 3, "less than a quarter of the host's memory is available)")
	e2.mu.Lock()
	avail = 4 << 30
	e2.mu.Unlock()
	take(slow(), spareReferences+2, 4, "from now on")
	// A small host keeps the fixed depth; a large one at most eight a key.
	if hostSpareLimit("reference", 2) != spareReferences || hostSpareLimit("candidate", 2) != spareDepth || hostSpareLimit("candidate", 128) != 8 || hostSpareLimit("reference", 16) != 8 {
		t.Fatal("hostSpareLimit")
	}
}
