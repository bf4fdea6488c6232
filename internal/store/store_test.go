package store

import (
	"errors"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/contract"
)

func result(task, kernel, verdict string) *contract.Result {
	return &contract.Result{
		Contract:    contract.Version,
		Task:        contract.Task{ID: task, Size: "cpu", Hash: "th"},
		Kernel:      contract.Kernel{Hash: kernel, Name: kernel + ".py"},
		Device:      "cpu",
		Verdict:     verdict,
		Fingerprint: contract.Fingerprint{"torch": "1.13", "cpu_model": "test cpu"},
	}
}

func TestEvaluationsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, c := range []struct{ task, kernel, verdict string }{
		{"kbp/l1/relu", "aaaa1111", contract.Pass},
		{"kbp/l1/relu2", "bbbb2222", contract.Fail},
		{"kbp/l1/relu", "bbbb2222", contract.Pass},
	} {
		ev := &Evaluation{Target: "local/cpu", Result: result(c.task, c.kernel, c.verdict)}
		ev.ID = NewID(time.Unix(1700000000+int64(i), 0))
		if err := s.PutEvaluation(ev); err != nil {
			t.Fatal(err)
		}
		if err := s.PutKernel(KernelRecord{Hash: c.kernel, Source: "src " + c.kernel}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	all, err := s.Evaluations(EvalFilter{})
	if err != nil || len(all) != 3 || all[0].ID != ids[2] {
		t.Fatalf("all: %v %d", err, len(all))
	}
	relu, _ := s.Evaluations(EvalFilter{Task: "kbp/l1/relu"})
	if len(relu) != 2 {
		t.Errorf("task filter must not match kbp/l1/relu2: got %d", len(relu))
	}
	byKernel, _ := s.Evaluations(EvalFilter{Kernel: "bbbb"})
	if len(byKernel) != 2 {
		t.Errorf("kernel prefix filter: got %d", len(byKernel))
	}
	failed, _ := s.Evaluations(EvalFilter{Verdict: contract.Fail})
	if len(failed) != 1 {
		t.Errorf("verdict filter: got %d", len(failed))
	}
	ev, err := s.Evaluation(ids[1][:14])
	if err != nil || ev.Result.Task.ID != "kbp/l1/relu2" {
		t.Errorf("prefix lookup: %v", err)
	}
	if _, err := s.Evaluation(ids[0][:4]); !errors.Is(err, ErrAmbiguous) {
		t.Errorf("short prefix: got %v, want ErrAmbiguous", err)
	}
	if _, err := s.Evaluation("ffffffffffff"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: got %v", err)
	}
	unit := UnitKey("aaaa1111", "kbp/l1/relu", "cpu", all[0].Platform, contract.Version)
	if ok, _ := s.HasUnit(unit); !ok {
		t.Error("unit index missing")
	}
	k, err := s.Kernel("aaaa")
	if err != nil || k.Source != "src aaaa1111" {
		t.Errorf("kernel: %v %q", err, k.Source)
	}
}

func TestBaselines(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := Baseline{TaskID: "kbp/l1/relu", Size: "gpu", Mode: "eager", Platform: "p1", Stats: &contract.Stats{Median: 1.5}}
	if err := s.PutBaseline(b); err != nil {
		t.Fatal(err)
	}
	b.Stats = &contract.Stats{Median: 1.25}
	if err := s.PutBaseline(b); err != nil {
		t.Fatal(err)
	}
	b.Mode = "reduce-overhead"
	if err := s.PutBaseline(b); err != nil {
		t.Fatal(err)
	}
	list, err := s.Baselines("kbp/l1/relu")
	if err != nil || len(list) != 2 || list[0].Stats.Median != 1.25 {
		t.Fatalf("baselines: %v %+v", err, list)
	}
}
