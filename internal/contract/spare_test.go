package contract

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSpareCandidateProcess checks that with spares on, an evaluation takes the candidate process
// an earlier one started, that it still gets a process of its own (never one a candidate ran in),
// and that Close ends the spare left over. Each record says where its time went.
func TestSpareCandidateProcess(t *testing.T) {
	e := newEvaluator(t, nil)
	e.opt.Spares = SparesOn
	var spareUsed []bool
	progress := func(m string) {
		t.Log(m)
		if strings.HasPrefix(m, "candidate process: a spare") {
			spareUsed[len(spareUsed)-1] = true
		}
	}
	e2, err := e.With(e.Config(), progress, nil)
	if err != nil {
		t.Fatal(err)
	}
	e2.opt.Spares = SparesOn
	task := loadTask(t, "scale_relu")
	k := loadKernel(t, "honest_torch")
	var pids []int
	for i := 0; i < 2; i++ {
		spareUsed = append(spareUsed, false)
		res := e2.Evaluate(context.Background(), task, k, "cpu", nil)
		if res.Verdict != Pass {
			t.Fatalf("evaluation %d: %s %s %s\n%s", i, res.Verdict, res.ErrorClass, res.Message, res.Log)
		}
		ph := res.Phases
		if ph == nil || ph.Total <= 0 || len(ph.Trials) != 2*e.Config().Seeds || ph.Timing <= 0 || ph.Rechecks <= 0 || ph.GPUWork <= 0 {
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
		for _, ss := range e.spares {
			if len(ss) != spareDepth {
				t.Errorf("evaluation %d: %d spares, want %d", i, len(ss), spareDepth)
			}
			pids = append(pids, ss[len(ss)-1].c.p.pid())
		}
		e.mu.Unlock()
	}
	if spareUsed[0] || !spareUsed[1] {
		t.Fatalf("spare used per evaluation: %v, want [false true]", spareUsed)
	}
	if len(pids) != 2 || pids[0] == pids[1] {
		t.Fatalf("spares after each evaluation: %v, want two different processes", pids)
	}
	e.mu.Lock()
	var last *proc
	for _, ss := range e.spares {
		for _, s := range ss {
			<-s.ready
			last = s.c.p
		}
	}
	e.mu.Unlock()
	if last == nil {
		t.Fatal("no spare left for a third evaluation")
	}
	e.Close()
	if !waitExited(last, 10*time.Second) {
		t.Fatal("the spare left over still runs after Close")
	}
}
