package study

import (
	"strings"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
)

// ContractStatic is the contract field of a result the static checks decided: no contract ran.
const ContractStatic = "static-check"

// Rejection is the reason the static checks reject a candidate (the messages of its error-level
// findings), or "" when they do not.
func Rejection(issues []sdk.Issue) string {
	var why []string
	for _, i := range issues {
		if i.Severity == sdk.SeverityError {
			why = append(why, i.Code+": "+i.Message)
		}
	}
	return strings.Join(why, "\n")
}

// ApplyFlags adds to a result the flags its static findings raise. A flag never changes the
// verdict.
func ApplyFlags(res *sdk.Result, issues []sdk.Issue) {
	for _, i := range issues {
		if i.Flag != "" {
			res.AddFlag(sdk.Flag{Name: i.Flag, Reason: i.Code + ": " + i.Message})
		}
	}
}

// Rejected is the result of a candidate the static checks stopped before it was built: a failure
// of class rejected, saying why.
func Rejected(task sdk.Task, k sdk.Kernel, device string, issues []sdk.Issue) *sdk.Result {
	now := time.Now().UTC()
	res := &sdk.Result{Contract: ContractStatic, Task: task, Kernel: k, Device: device, Verdict: sdk.Fail,
		ErrorClass: sdk.ClassRejected, Phase: "static", Message: Rejection(issues), StartedAt: now, FinishedAt: now}
	ApplyFlags(res, issues)
	return res
}
