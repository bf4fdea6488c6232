package cli

import (
	"fmt"
	"strings"

	"github.com/kbplatform/kbplatform/internal/plugins"
	"github.com/kbplatform/kbplatform/internal/record"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// Exit statuses beyond 0 and 1 (docs/quickstart.md lists them).
const (
	exitKernelFailed = 3   // a kernel failed its verdict
	exitNoVerdict    = 4   // the task, the platform or the environment failed: no verdict about a kernel
	exitInterrupted  = 130 // stopped by a signal; what finished is stored
)

// recorder is the record path every command stores evaluations through.
func (a *app) recorder(st *store.Store, target *plugins.Instance) *record.Recorder {
	return &record.Recorder{Store: st, Target: a.v.GetString("target"), Validator: target.Target()}
}

// verdictExit is the exit status of a run of n evaluations: a kernel's failure first, then
// failures that are nobody's kernel.
func verdictExit(failed, noVerdict, n int, what string) error {
	switch {
	case failed > 0 && noVerdict > 0:
		return exitError{code: exitKernelFailed, msg: fmt.Sprintf("%d of %d %s did not pass, and %d got no verdict (not the kernel's failure)", failed, n, what, noVerdict)}
	case failed > 0:
		return exitError{code: exitKernelFailed, msg: fmt.Sprintf("%d of %d %s did not pass", failed, n, what)}
	case noVerdict > 0:
		return exitError{code: exitNoVerdict, msg: fmt.Sprintf("%d of %d %s got no verdict: the task, the platform or the environment failed, not the kernel", noVerdict, n, what)}
	}
	return nil
}

// blameText says whose failure an evaluation without a verdict was.
func blameText(ev *store.Evaluation) string {
	b := ev.Blame
	if b == "" {
		b = record.BlameOf(ev.Result)
	}
	switch b {
	case record.BlameTask:
		return "the task's fault"
	case record.BlameEnvironment:
		return "the environment's fault"
	}
	return "the platform's fault"
}

// pickDevice resolves the device and refuses one the target does not have, before anything runs:
// a missing device is the platform's failure, never a kernel's.
func (a *app) pickDevice(hw *sdk.Hardware) (string, error) {
	device := a.device(hw)
	if device == "all" || strings.Contains(device, ",") {
		return "", fmt.Errorf("this command runs on one device; --device %s is for eval, baseline and study run", device)
	}
	var names []string
	for _, d := range hw.Devices {
		if d.Name == device || (device == "cuda" && d.Kind == "cuda") {
			return device, nil
		}
		names = append(names, d.Name)
	}
	return "", exitError{code: exitNoVerdict, msg: fmt.Sprintf("platform: target %s has no device %s (it has: %s); pick another with --device",
		a.v.GetString("target"), device, strings.Join(names, ", "))}
}
