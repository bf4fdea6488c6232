// Package record is the one path by which an evaluation becomes a stored record, whoever asked
// for it (`eval`, `baseline`, a study's strategy): it turns a target's failure into a result,
// re-attaches the sources the wire leaves out, stamps real times, decides who a failure is on
// (the kernel, the task, the platform or the environment), names the target one way, and stores
// the kernel and the evaluation.
package record

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// ErrInterrupted means the evaluation was stopped from outside: it says nothing about anyone and
// is not stored.
var ErrInterrupted = errors.New("the evaluation was interrupted")

// Validator runs a task's reference alone; a target plugin is one.
type Validator interface {
	Validate(ctx context.Context, task sdk.Task, device string, cfg sdk.Config) (*sdk.Validation, error)
}

// Recorder stores evaluations made on one target.
type Recorder struct {
	Store *store.Store
	// Target is the target plugin's reference (`local` or `target/local`).
	Target string
	// Validator, when set, is asked to confirm a task's fault before a failure is blamed on the
	// task rather than the kernel.
	Validator Validator
}

// Attempt is one evaluation as the caller made it: what it asked and what the target answered.
type Attempt struct {
	Task   sdk.Task   // with its source
	Kernel sdk.Kernel // with its source (empty for a baseline: the task's own Model)
	Device string
	Config sdk.Config
	Result *sdk.Result // nil when Err is set
	Err    error       // the target's own failure (a crash, a refused request)
	Study  string
	Model  string      // the study's model that wrote the kernel
	Arm    string      // the study's arm (model × backend × strategy × target × seed) it belongs to
	Issues []sdk.Issue // the backend's static-check findings on the kernel
}

// Record turns an attempt into a stored evaluation. An interrupted attempt returns ErrInterrupted
// and stores nothing.
func (rc *Recorder) Record(ctx context.Context, a Attempt) (*store.Evaluation, error) {
	res := rc.Result(ctx, a)
	if res.ErrorClass == sdk.ClassInterrupted {
		return nil, ErrInterrupted
	}
	ev := &store.Evaluation{Target: TargetName(rc.Target, res.Device), Result: res, Study: a.Study, Model: a.Model, Arm: a.Arm, Issues: a.Issues, Blame: BlameOf(res)}
	if res.Kernel.Hash != "" && res.Kernel.Source != "" {
		k := store.KernelRecord{Hash: res.Kernel.Hash, Source: res.Kernel.Source, Name: res.Kernel.Name, FirstSeen: time.Now().UTC()}
		if err := rc.Store.PutKernel(k); err != nil {
			return ev, lostEvaluation(res, err)
		}
	}
	if err := rc.Store.PutEvaluation(ev); err != nil {
		return ev, lostEvaluation(res, err)
	}
	return ev, nil
}

// lostEvaluation names the evaluation a failed write lost (a full disk stops a study mid-run,
// and its user must know which result to expect again when the study resumes).
func lostEvaluation(res *sdk.Result, err error) error {
	kernel := res.Kernel.Name
	if kernel == "" {
		kernel = "its own Model (a baseline)"
	}
	return fmt.Errorf("the evaluation of %s (kernel %s on %s, verdict %s) was not stored: %w", res.Task.ID, kernel, res.Device, res.Verdict, err)
}

// Result is the attempt's result as it is stored: complete and blamed, not yet written.
func (rc *Recorder) Result(ctx context.Context, a Attempt) *sdk.Result {
	res := a.Result
	if a.Err != nil || res == nil {
		res = &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassPlatform, Phase: "target", Config: a.Config}
		switch {
		case ctx.Err() != nil:
			res.ErrorClass, res.Phase, res.Message = sdk.ClassInterrupted, "interrupted", "the evaluation was interrupted before it finished"
		case a.Err != nil:
			res.Message = fmt.Sprintf("the target failed: %v", a.Err)
		default:
			res.Message = "the target returned no result"
		}
	}
	if res.Task.ID == "" {
		res.Task = a.Task
	}
	if res.Kernel.Hash == "" {
		res.Kernel = a.Kernel
	}
	// The wire carries neither source; the record keeps both.
	res.Task.Source = a.Task.Source
	if a.Kernel.Source != "" && (res.Kernel.Hash == a.Kernel.Hash) {
		res.Kernel.Source = a.Kernel.Source
	}
	if res.Device == "" {
		res.Device = a.Device
	}
	now := time.Now().UTC()
	if res.FinishedAt.IsZero() {
		res.FinishedAt = now
	}
	if res.StartedAt.IsZero() {
		res.StartedAt = res.FinishedAt
	}
	if res.ErrorClass != sdk.ClassInterrupted {
		rc.blame(ctx, res, a)
	}
	return res
}

// blame relabels a failure that is not the kernel's.
func (rc *Recorder) blame(ctx context.Context, res *sdk.Result, a Attempt) {
	if what := environmentGap(res); what != "" {
		relabel(res, BlameEnvironment, "this platform lacks "+what)
		return
	}
	switch {
	case res.ErrorClass == sdk.ClassResource:
		// Already a blamed class (verdict error, the platform's): it keeps its own name, which says
		// what to do about it.
	case res.ErrorClass == sdk.ClassReference && res.Phase == sdk.PhaseTask:
		// The contract confirmed it in a clean reference process: the task's own file or inputs,
		// even where its code was killed for memory (the task's code asked for it).
		relabel(res, BlameTask, "the task's own code failed")
	case res.ErrorClass == sdk.ClassReference && mentionsOOM(res):
		relabel(res, BlamePlatform, "the reference ran out of memory on "+res.Device)
	case res.ErrorClass == sdk.ClassReference:
		relabel(res, BlameTask, "the task's own Model failed")
	case res.ErrorClass == sdk.ClassHarness:
		relabel(res, BlamePlatform, "the harness could not run")
	case res.Verdict == sdk.VerdictError && classOf[BlameOf(res)] != res.ErrorClass:
		relabel(res, BlamePlatform, "no verdict")
	case inputsFailed(res) && rc.Validator != nil:
		// The candidate's process says the task's get_inputs raised; a clean reference process
		// decides. If the task validates, the failure stays the kernel's.
		v, err := rc.Validator.Validate(ctx, a.Task, res.Device, a.Config)
		if err == nil && v != nil && !v.OK {
			relabel(res, BlameTask, "the task's inputs cannot be made: "+strings.Join(v.Errors, "; "))
		}
	}
}

func mentionsOOM(r *sdk.Result) bool {
	m := strings.ToLower(r.Message)
	return strings.Contains(m, "out of memory") || strings.Contains(m, "memoryerror")
}

// TargetName is how records name where an evaluation ran: the target plugin's name and the
// device, e.g. local/cpu (never target/local/cpu).
func TargetName(ref, device string) string {
	return strings.TrimPrefix(ref, "target/") + "/" + device
}
