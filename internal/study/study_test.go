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
		{Task: "a", Correct: true, BestSpeedup: 1.5},
		{Task: "b", Correct: false},
		{Task: "c", Blame: "task"},
		{Task: "d", Blame: "environment"},
	}
	tests := []struct {
		p    float64
		want float64
	}{{0, 0.5}, {1, 0.5}, {2, 0}}
	for _, tc := range tests {
		if got := FastP(outcomes, tc.p); got != tc.want {
			t.Errorf("fast_%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := Judged(outcomes); got != 2 {
		t.Errorf("judged %d, want 2", got)
	}
}
