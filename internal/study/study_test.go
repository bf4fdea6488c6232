package study

import (
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

// A study's id changes with everything that could change its results, the contract version
// included, and with nothing else.
func TestSpecID(t *testing.T) {
	base := Spec{Tasks: []string{"b", "a"}, Size: "cpu", Device: "cpu", Model: PluginRef{Ref: "model/replay", Config: []byte(`{"a":1,"b":2}`)},
		Contract: sdk.DefaultConfig(), ContractVersion: "kbp-contract/4"}
	tests := []struct {
		name string
		edit func(*Spec)
		same bool
	}{
		{"name only", func(s *Spec) { s.Name = "x" }, true},
		{"task order", func(s *Spec) { s.Tasks = []string{"a", "b"} }, true},
		{"config formatting", func(s *Spec) { s.Model.Config = []byte(`{ "b": 2, "a": 1 }`) }, true},
		{"contract version", func(s *Spec) { s.ContractVersion = "kbp-contract/5" }, false},
		{"device", func(s *Spec) { s.Device = "cuda:0" }, false},
		{"seeds", func(s *Spec) { s.Contract.Seeds++ }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			s.Tasks = append([]string(nil), base.Tasks...)
			tc.edit(&s)
			if got := s.ID() == base.ID(); got != tc.same {
				t.Errorf("same id: got %v, want %v", got, tc.same)
			}
		})
	}
}

func TestFastPLeavesOutBlamedTasks(t *testing.T) {
	outcomes := []TaskOutcome{
		{Task: "a", Correct: true, BestSpeedup: 1.5, Ran: true},
		{Task: "b", Correct: false, Ran: true},
		{Task: "c", Blame: "task", Ran: true},
		{Task: "d", Blame: "environment", Ran: true},
	}
	tests := []struct {
		p    float64
		want float64
	}{{0, 0.5}, {1, 0.5}, {2, 0}}
	for _, tc := range tests {
		if got := FastP(outcomes, tc.p, false); got != tc.want {
			t.Errorf("fast_%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := Judged(outcomes); got != 2 {
		t.Errorf("judged %d, want 2", got)
	}
}

// A unit that never ran (the study was interrupted first) is in no fast_p; a unit whose only
// passes carry a kernel flag is no solution, and counts only counting flagged.
func TestFastPOverUnitsThatRanAndSolutions(t *testing.T) {
	outcomes := []TaskOutcome{
		{Task: "a", Correct: true, BestSpeedup: 1.5, Ran: true, Done: true},
		{Task: "b", Flagged: true, FlaggedSpeedup: 2, Ran: true, Done: true},
		{Task: "c", Correct: true, BestSpeedup: 0.9, Flagged: true, FlaggedSpeedup: 1.2, Ran: true, Done: true},
		{Task: "d", Ran: true},   // interrupted after an evaluation: it ran
		{Task: "g", Attempts: 1}, // interrupted before its evaluation was stored
		{Task: "e"}, {Task: "f"}, // never started
	}
	for _, tc := range []struct {
		p       float64
		flagged bool
		want    float64
	}{{0, false, 2.0 / 4}, {1, false, 1.0 / 4}, {0, true, 3.0 / 4}, {1, true, 3.0 / 4}, {1.5, true, 1.0 / 4}} {
		if got := FastP(outcomes, tc.p, tc.flagged); got != tc.want {
			t.Errorf("fast_%v (counting flagged %v) = %v, want %v", tc.p, tc.flagged, got, tc.want)
		}
	}
	if j, n := Judged(outcomes), NotRun(outcomes); j != 4 || n != 3 {
		t.Errorf("judged %d, not run %d; want 4 and 3", j, n)
	}
	if !AnyFlagged(outcomes) || AnyFlagged(outcomes[:1]) {
		t.Error("AnyFlagged")
	}
}
