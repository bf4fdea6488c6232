package contract

import (
	"context"
	"fmt"
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
)

// Failures of the task's own code, told apart from the candidate's by the reference process.
//
// The candidate's process runs task code too: it loads the task file, and makes its own inputs
// with the task's get_inputs. When that code fails there — a file that does not parse, inputs
// that are not a function of the seed, a get_inputs killed for memory — the candidate would be
// judged for it (load_error, input_mutated, crash). What that process says cannot be trusted, so
// the driver asks the clean reference process to run the same task code, and only a failure
// there is the task's: verdict error, class reference_error, phase PhaseTask (the host stores it
// as task_error). When the reference runs it cleanly, the failure stays the candidate's.

// PhaseTask is the phase of a failure the reference process confirmed is the task's own code's.
const PhaseTask = sdk.PhaseTask

// validationSeeds are the seeds `tasks validate` runs the reference at.
var validationSeeds = []int{11, 12}

// inputsDifferMessage says that a task's get_inputs is not a function of its seed.
func inputsDifferMessage(seed int, dist string, differ []int) string {
	return fmt.Sprintf("the task's get_inputs is not a function of its seed: two calls under seed %d (%s) made different input(s) %v; "+
		"it must draw only from the generators the harness seeds (torch's, NumPy's and Python's global ones), not from a generator, clock or os.urandom of its own",
		seed, dist, differ)
}

// taskFails records a failure the reference confirmed is the task's.
func (r *evalRun) taskFails(msg, tb string) {
	r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message, r.res.Traceback = VerdictError, ClassReference, PhaseTask, msg, tb
}

// blameInputs runs after correctness failed on wrong or changed inputs or outputs: the
// reference makes the first failing trial's inputs twice. Inputs that differ are the task's
// fault, whatever the candidate did: both sides made their own from one seed, so every
// comparison between them was meaningless.
func (r *evalRun) blameInputs() {
	if r.res.ErrorClass != "" || len(r.res.Tampered) > 0 {
		return
	}
	for _, tr := range r.res.Trials {
		if tr.OK && len(tr.InputChanged) == 0 && (tr.Consistent == nil || *tr.Consistent) {
			continue
		}
		var rep inputsRepeatReply
		var err error
		solo(r.cand, func() {
			rep, err = call(r.ctx, r.ref.p, r.e.opt.Config.CallTimeout, inputsRepeatRequest{Seed: tr.Seed, Dist: tr.Dist})
		})
		switch {
		case err != nil:
			// The task's get_inputs ran fine for this seed during the trial: a failure now is the
			// reference process's, and the verdict below stays the one the trials gave.
			r.res.Warnings = append(r.res.Warnings, "could not check that the task's inputs are a function of the seed: "+err.Error())
		case len(rep.Differ) > 0:
			r.taskFails(inputsDifferMessage(tr.Seed, tr.Dist, rep.Differ), "")
			r.res.Mismatch = nil
		}
		return
	}
}

// blameCrash runs after the candidate's process died during a correctness trial (a signal, a
// kill for memory): the reference makes the trial's inputs, twice. If the task's get_inputs dies
// or raises there too, the death was the task's code's; if it runs, the crash stays the
// candidate's (its own memory, its own signal).
func (r *evalRun) blameCrash(seed int, dist string) {
	if r.res.ErrorClass != ClassCrash || r.ctx.Err() != nil {
		return
	}
	rep, err := call(r.ctx, r.ref.p, r.e.opt.Config.CallTimeout, inputsRepeatRequest{Seed: seed, Dist: dist})
	if r.ctx.Err() != nil {
		return
	}
	cand := r.res.Message
	if err != nil {
		_, msg, tb := describeErr(err)
		r.taskFails(fmt.Sprintf("the task's get_inputs fails in the clean reference process too (seed %d, %s): %s; the candidate's process had died making or using the same inputs (%s)", seed, dist, msg, cand), tb)
		r.ref.p.kill()
		return
	}
	if len(rep.Differ) > 0 {
		r.taskFails(inputsDifferMessage(seed, dist, rep.Differ)+" (the candidate's process died meanwhile: "+cand+")", "")
	}
}

// confirmTaskLoad runs when the compile process says the task file does not load: that process
// imported the candidate too, so the reference loads the task alone and decides. The task's
// failure keeps its class; otherwise the claim was the candidate's code's, a load_error.
func (e *Evaluator) confirmTaskLoad(ctx context.Context, res *Result, t Task, ref *pendingRef) {
	fail := func() {
		res.Verdict, res.ErrorClass = Fail, ClassLoad
		res.Message = "the candidate's import reported the task's own failure, which the reference process does not confirm: " + res.Message
	}
	r, err := ref.wait()
	if err != nil {
		return // the reference cannot start: no verdict either way (the compile's error stands)
	}
	path, err := e.writeTask(t)
	if err != nil {
		return
	}
	build := false
	_, err = call(ctx, r.p, e.opt.Config.CompileTimeout, loadRequest{TaskPath: path, Build: &build})
	if err == nil {
		fail()
		return
	}
	cls, msg, tb := describeErr(err)
	switch {
	case cls == ClassReference:
		res.Verdict, res.ErrorClass, res.Phase, res.Message, res.Traceback = VerdictError, ClassReference, PhaseTask, msg, tb
		r.p.kill()
	default:
		r.p.kill()
		res.Warnings = append(res.Warnings, "the reference process could not load the task either: "+msg)
	}
}

// untrustedTaskClaim is the class a candidate process's failure gets when it names the task
// (reference_error): the reference had loaded the same task, so the claim is the candidate's
// code's own doing.
func untrustedTaskClaim(phase string) string {
	if strings.HasPrefix(phase, "load") || phase == "compile" {
		return ClassLoad
	}
	return ClassRuntime
}
