package cli

import (
	"testing"

	"github.com/kbplatform/kbplatform/internal/contract"
)

// A trial the contract added is counted apart from the task's own trials of its distribution.
func TestTrialSummaryCountsAddedTrialsApart(t *testing.T) {
	r := &contract.Result{Trials: []contract.Trial{
		{Dist: "default"}, {Dist: "default"}, {Dist: "offset"}, {Dist: "scaled"}, {Dist: "offset", Added: "why"},
	}}
	if got, want := trialSummary(r), "default×2, offset×1, scaled×1, offset×1 added"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
