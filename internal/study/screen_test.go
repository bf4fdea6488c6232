package study

import (
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

func TestScreening(t *testing.T) {
	warn := sdk.Issue{Severity: sdk.SeverityWarning, Code: "torch-delegation", Message: "forward calls torch.relu", Flag: sdk.FlagTorchDelegation}
	again := sdk.Issue{Severity: sdk.SeverityWarning, Code: "torch-fallback", Message: "except calls torch.relu", Flag: sdk.FlagTorchDelegation}
	plain := sdk.Issue{Severity: sdk.SeverityWarning, Code: "threads", Message: "starts threads"}
	reject := sdk.Issue{Severity: sdk.SeverityError, Code: "harness-patching", Message: "assigns time.perf_counter"}

	t.Run("warnings do not reject", func(t *testing.T) {
		if got := Rejection([]sdk.Issue{warn, plain}); got != "" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("a flag leaves a passing verdict alone, once per name", func(t *testing.T) {
		res := &sdk.Result{Verdict: sdk.Pass}
		ApplyFlags(res, []sdk.Issue{warn, plain, again})
		if res.Verdict != sdk.Pass || len(res.Flags) != 1 || res.Flags[0].Reason != "torch-delegation: forward calls torch.relu" {
			t.Errorf("got %+v", res)
		}
	})
	t.Run("an error rejects, with its reason", func(t *testing.T) {
		res := Rejected(sdk.Task{ID: "kbp/l1/relu"}, sdk.Kernel{Hash: "h"}, "cpu", []sdk.Issue{warn, reject})
		if res.Verdict != sdk.Fail || res.ErrorClass != sdk.ClassRejected || res.Message != "harness-patching: assigns time.perf_counter" ||
			res.Contract != ContractStatic || !res.HasFlag(sdk.FlagTorchDelegation) {
			t.Errorf("got %+v", res)
		}
	})
}
