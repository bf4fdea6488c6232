package contract

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
)

// Validate runs the task's reference in a clean process on every input distribution: it must
// build, run, be deterministic and give finite outputs. A reference whose output barely changes
// across distributions and seeds gets a warning that says what evaluations do about it (a
// constant "kernel" would pass its trials).
func (e *Evaluator) Validate(ctx context.Context, t Task, device string) *Validation {
	v := &Validation{TaskID: t.ID, Size: t.Size, Device: device}
	fail := func(msg string) *Validation {
		v.OK = false
		v.Errors = append(v.Errors, msg)
		return v
	}
	// A validation runs the reference on the device like an evaluation does, and may share its
	// reference process: it waits for the device's slot too.
	giveBack, err := e.takeDevice(ctx, device)
	if err != nil {
		if ctx.Err() != nil { // else the GPU's lock file could not be opened, and err says so
			err = fmt.Errorf("stopped while waiting for %s: %w", device, err)
		}
		return fail(err.Error())
	}
	defer giveBack()
	ref, err := e.reference(ctx, t, device, "eager")
	if err != nil {
		return fail(err.Error())
	}
	defer e.release(ref)
	taskPath, err := e.writeTask(t)
	if err != nil {
		return fail(err.Error())
	}
	rep, err := call(ctx, ref.p, e.opt.Config.CompileTimeout, loadRequest{TaskPath: taskPath, InitSeed: 1, Mode: "eager"})
	if err != nil {
		cls, msg, _ := describeErr(err)
		ref.p.kill()
		if cls == ClassResource {
			return fail("the task does not fit " + device + ": " + msg)
		}
		return fail("the reference does not build: " + msg)
	}
	ref.noteLoad(rep)
	if msg := ref.fits(); msg != "" {
		return fail(msg)
	}
	dists := t.Distributions
	if len(dists) == 0 {
		dists = []string{"default", "scaled"}
	}
	vrep, err := call(ctx, ref.p, e.opt.Config.CallTimeout, validateRequest{Distributions: dists, Seeds: validationSeeds, Tolerance: t.Tolerance})
	if err != nil {
		_, msg, _ := describeErr(err)
		ref.p.kill()
		return fail("the reference raised: " + msg)
	}
	// The report as the reference made it, less the reply's status.
	b, _ := json.Marshal(vrep.validateReport)
	_ = json.Unmarshal(b, &v.Report)
	v.OK = true
	inputsDiffered := false
	for _, d := range vrep.Distributions {
		if d.Nonfinite > 0 {
			v.OK = false
			v.Errors = append(v.Errors, fmt.Sprintf("distribution %s gives %d non-finite reference values", d.Dist, d.Nonfinite))
		}
		switch {
		case len(d.InputsDiffer) > 0 && !v.OK && inputsDiffered:
			v.Errors = append(v.Errors, fmt.Sprintf("nor under %s (input(s) %v)", d.Dist, d.InputsDiffer))
		case len(d.InputsDiffer) > 0:
			v.OK, inputsDiffered = false, true
			v.Errors = append(v.Errors, inputsDifferMessage(validationSeeds[0], d.Dist, d.InputsDiffer))
		case !d.Deterministic:
			v.OK = false
			v.Errors = append(v.Errors, fmt.Sprintf("the reference is not deterministic under %s: two calls on one input differ beyond the task's tolerance%s", d.Dist, repeatDiff(d.RepeatDiff)))
		case d.Bitwise != nil && !*d.Bitwise:
			// Not a fault of the task: PyTorch's own kernels (cuDNN's transposed convolutions
			// among them) add in an order that varies from call to call. Candidates' two calls
			// on one input are held to the tolerance too, never to the bit.
			v.Warnings = append(v.Warnings, fmt.Sprintf("under %s two calls on one input differ in their last bits%s, within the task's tolerance: the reference's kernels are not bitwise reproducible", d.Dist, repeatDiff(d.RepeatDiff)))
		}
		if len(d.Output) > 0 && v.Output == "" {
			var parts []string
			for _, o := range d.Output {
				if dt, ok := o["dtype"]; ok {
					parts = append(parts, fmt.Sprintf("%v%s", dt, shapeString(o["shape"])))
				} else {
					parts = append(parts, fmt.Sprintf("%v", o["value"]))
				}
			}
			v.Output = strings.Join(parts, ", ")
		}
	}
	if w := sensitivityWarning(dists, vrep.Sensitivity); w != "" {
		v.Warnings = append(v.Warnings, w)
	}
	prep, err := call(ctx, ref.p, e.opt.Config.CallTimeout, probeRequest{Distributions: SignProbes, Seed: 13, Tolerance: t.Tolerance})
	if err != nil {
		_, msg, _ := describeErr(err)
		ref.p.kill()
		return fail("the reference failed while probed under " + strings.Join(SignProbes, ", ") + " inputs: " + msg)
	}
	v.Probes = probeOutcomes(prep.Probes)
	if slices.ContainsFunc(prep.Probes, func(p probeEntry) bool { return p.Error != "" }) {
		ref.p.kill() // a reference that raised may have left its process unusable
	}
	if w := probeWarning(dists, v.Probes); w != "" {
		v.Warnings = append(v.Warnings, w)
	}
	return v
}

// signVarying are the distributions whose inputs take both signs.
var signVarying = []string{"uniform", "negated"}

// probeWarning says when neither the task's own distributions nor a kept probe is one that makes
// inputs of both signs (a task whose own inputs already take both signs under default keeps the
// probes too: a reference that handles randn handles its negation).
func probeWarning(dists []string, probes []sdk.ProbedDistribution) string {
	for _, d := range dists {
		if slices.Contains(signVarying, d) {
			return ""
		}
	}
	var refused []string
	for _, p := range probes {
		if p.Kept && slices.Contains(signVarying, p.Dist) {
			return ""
		}
		if !p.Kept && slices.Contains(signVarying, p.Dist) {
			refused = append(refused, p.Dist+": "+p.Reason)
		}
	}
	return fmt.Sprintf("the task's inputs admit only sign-keeping distributions (%s; %s): its evaluations cannot see how a kernel handles inputs of the other sign",
		strings.Join(dists, ", "), strings.Join(refused, "; "))
}

// sensitivityWarning says what an evaluation does about a task whose output barely changes
// across its distributions and seeds (sensitivity.go); "" when the output changes.
func sensitivityWarning(dists []string, s *sensitivityReport) string {
	switch {
	case s == nil || s.Varies:
		return ""
	case s.Dist != "":
		return fmt.Sprintf("the output barely changes across the task's distributions (%s) and seeds (one fixed output is within the tolerance of all of them): a constant kernel would pass those trials, so every evaluation adds a trial under %s, whose output it fails",
			strings.Join(dists, ", "), s.Dist)
	}
	var tried []string
	for _, p := range s.Probed {
		tried = append(tried, p.Dist)
	}
	return fmt.Sprintf("no input distribution changes the output beyond the tolerance (the task's %s, then %s): correctness trials cannot tell a constant kernel from a computed one, and every result on this task is flagged %s",
		strings.Join(dists, ", "), strings.Join(tried, ", "), sdk.FlagInputInsensitive)
}

// repeatDiff says how far apart two calls on one input were, when the worker said.
func repeatDiff(d *float64) string {
	if d == nil {
		return ""
	}
	return fmt.Sprintf(" (max abs difference %.3g)", *d)
}

// BaselineModes are the execution modes `kbplatform baseline` times by default.
var BaselineModes = []string{"eager", "compile-default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"}

// identityKernel runs the task's own Model as the candidate.
const identityKernel = "# The task's own Model, run as a candidate (a baseline).\nfrom kbp_task import Model as ModelNew  # noqa: F401\n"

// Baseline evaluates the task's own Model in an execution mode against eager, with the full
// contract: correctness of the mode's outputs, then both timed the same way. For mode "eager" the
// speedup is an A/A measurement: how far from 1.0 the platform's noise puts it.
func (e *Evaluator) Baseline(ctx context.Context, t Task, device, mode string) *Result {
	k := Kernel{Hash: hashString(identityKernel + mode), Source: identityKernel, Name: "baseline:" + mode}
	// The task's own Model builds nothing: a compile phase would only start one more process (an
	// import of torch, 3-10 s on the H200 host, for every task and mode).
	return e.evaluate(ctx, t, k, device, &CompileResult{OK: true}, mode, false)
}

func shapeString(v any) string {
	list, ok := v.([]any)
	if !ok {
		return fmt.Sprint(v)
	}
	parts := make([]string, len(list))
	for i, x := range list {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
