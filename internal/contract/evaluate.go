package contract

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
)

// evalRun carries the state of one evaluation.
type evalRun struct {
	e       *Evaluator
	ctx     context.Context
	limit   *limit // ctx's time limit, paused while the timed calls wait for the CPU (cputurn.go)
	res     *Result
	task    Task
	ref     *refServer
	cand    *proc
	dumpDir string
	rng     *mrand.Rand
	dir     string   // the candidate's folder
	room    workRoom // what the evaluation needs in the work folder (workroom.go)
	mode    string   // how the candidate's module is run: eager, or a torch.compile mode (baselines)
	// evidence: profile a correct candidate once more and raise the runtime flags (not for
	// baselines, whose "candidate" is the task's own Model).
	evidence bool
	start    time.Time
	phases   *Phases
}

// since is the seconds from the moment the evaluation held its device.
func (r *evalRun) since() float64 { return time.Since(r.start).Seconds() }

// Evaluate runs the full contract for one kernel on one task and device. It never returns nil;
// failures of the harness itself give Verdict "error".
func (e *Evaluator) Evaluate(ctx context.Context, t Task, k Kernel, device string, compiled *CompileResult) *Result {
	return e.evaluate(ctx, t, k, device, compiled, "eager", true)
}

func (e *Evaluator) evaluate(parent context.Context, t Task, k Kernel, device string, compiled *CompileResult, mode string, evidence bool) *Result {
	res := e.run(parent, t, k, device, compiled, mode, evidence)
	if parent.Err() != nil && res.Verdict != Pass {
		// Stopped from outside (Ctrl-C, a deadline of the caller): whatever failed, it says
		// nothing about the kernel.
		res.Verdict, res.ErrorClass, res.Phase = VerdictError, ClassInterrupted, "interrupted"
		res.Message = "the evaluation was interrupted before it finished: " + parent.Err().Error()
	}
	return res
}

func (e *Evaluator) run(ctx context.Context, t Task, k Kernel, device string, compiled *CompileResult, mode string, evidence bool) *Result {
	cfg := e.opt.Config
	res := &Result{Contract: Version, Task: t, Kernel: k, Device: device, Config: cfg, StartedAt: time.Now().UTC(), Sandbox: e.sandboxStatus()}
	// Wait for the device before the evaluation's time limit starts: waiting is not the kernel's.
	giveBack, err := e.takeDevice(ctx, device)
	if err != nil {
		res.Verdict, res.ErrorClass, res.Message = VerdictError, ClassInterrupted, "stopped while waiting for "+device
		if ctx.Err() == nil { // the GPU's lock file could not be opened
			res.ErrorClass, res.Message = ClassHarness, err.Error()
		}
		res.FinishedAt = time.Now().UTC()
		return res
	}
	defer giveBack()
	res.Phases = &Phases{WaitDevice: time.Since(res.StartedAt).Seconds()}
	if msg := e.checkStartRoom(); msg != "" {
		res.Verdict, res.ErrorClass, res.Phase, res.Message = VerdictError, ClassHarness, "start", msg
		res.FinishedAt = time.Now().UTC()
		return res
	}
	start := time.Now()
	res.StartedAt = start.UTC()
	defer func() { // before the slot is given back
		res.FinishedAt = time.Now().UTC()
		res.Phases.Total = time.Since(start).Seconds()
	}()
	timeout := cfg.Timeout
	if t.Timeout > 0 {
		timeout = t.Timeout
	}
	lim := newLimit(ctx, timeout)
	defer lim.stop()
	ctx = lim

	// The reference process starts while the candidate compiles: each start is an import of
	// torch (seconds), and neither needs the other. A reference started for a kernel that then
	// fails to compile stays cached for the next evaluation of the task.
	e.progress("starting reference for %s on %s", t.ID, device)
	ref := startReference(func() (*refServer, error) { return e.reference(ctx, t, device, "eager") })
	defer func() {
		var fp Fingerprint
		if r, err := ref.wait(); err == nil {
			fp = r.fp
			e.release(r)
		}
		if res.Fingerprint == nil {
			res.Fingerprint = e.fingerprint(device, fp)
		}
	}()
	// The candidate's process (after the reference's start is under way: a spare may still be
	// finishing its imports): a spare started during an earlier evaluation when there is one
	// (its torch import already done), else a new one. Its folder is the evaluation's.
	cand, err := e.workerProcess(ctx, "candidate", device)
	if err != nil {
		res.Verdict, res.ErrorClass, res.Message = VerdictError, ClassHarness, err.Error()
		return res
	}
	defer os.RemoveAll(cand.dir)
	defer cand.p.close()
	dir := cand.dir
	dumpDir := filepath.Join(dir, "out")
	if err := os.Mkdir(dumpDir, 0o700); err != nil {
		res.Verdict, res.ErrorClass, res.Message = VerdictError, ClassHarness, e.noRoom(err).Error()
		return res
	}

	if compiled == nil {
		e.progress("compiling %s", k.Name)
		compiled = e.Compile(ctx, t, k, device)
	}
	res.Compile = compiled
	if !compiled.OK {
		res.Verdict, res.ErrorClass, res.Phase = Fail, compiled.ErrorClass, "compile"
		res.Message, res.Traceback, res.Log = compiled.Message, compiled.Traceback, compiled.Log
		if msg, ok := e.sandboxStopsCUDA(device, compiled.Message+"\n"+compiled.Log, ref); ok {
			res.Verdict, res.ErrorClass, res.Message = VerdictError, ClassHarness, msg
			return res
		}
		switch compiled.ErrorClass {
		case ClassHarness:
			res.Verdict = VerdictError
		case ClassReference:
			// The task file does not load, says a process that imported the candidate too.
			res.Verdict = VerdictError
			e.confirmTaskLoad(ctx, res, t, ref)
		}
		return res
	}
	// The kernel's builds, made by its compile in its own build folder, are copied into the
	// evaluation's folder, the only one its process may use (confine.go).
	if err := stageBuilds(filepath.Join(e.buildDir(k, device), "ext"), cand.settings.ExtCache); err != nil {
		res.Verdict, res.ErrorClass, res.Message = VerdictError, ClassHarness, "staging the kernel's builds: "+e.noRoom(err).Error()
		return res
	}
	rng, seed := e.seedSource()
	res.Config.Seed = seed
	run := &evalRun{e: e, ctx: ctx, limit: lim, res: res, task: t, dumpDir: dumpDir, rng: rng, mode: mode, evidence: evidence, start: start, phases: res.Phases}
	run.execute(k, device, dir, cand, ref.wait)
	return res
}

// candFail records a failure caused by the candidate process.
func (r *evalRun) candFail(phase string, err error) {
	cls, msg, tb := describeErr(err)
	if claimsDiskFull(err, msg, tb) {
		// A write found no room: the platform's only when the driver's own look at the work
		// folder confirms it (workroom.go).
		platform, why := r.e.judgeFull(r.dir, r.room)
		if platform && r.ctx.Err() == nil {
			r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message, r.res.Traceback = VerdictError, ClassHarness, phase, why+"\n"+msg, tb
			return
		}
		msg = why + ": " + msg
		if cls == ClassHarness {
			cls = untrustedTaskClaim(phase) // a harness_error from this process is a claim too
		}
	}
	if cls == ClassResource {
		// The candidate's own allocations ran the device out of memory: the task was known to
		// leave it room, so this is the kernel's doing.
		cls = ClassRuntime
	}
	if cls == ClassReference {
		cls = untrustedTaskClaim(phase) // the reference loaded the same task (taskblame.go)
	}
	if r.evidence {
		// A baseline (evidence off) runs the task's own model: no kernel code ran in the process.
		cls, msg = untrustedHarnessClaim(cls, msg, phase)
	}
	if r.ctx.Err() != nil {
		cls, msg = ClassTimeout, fmt.Sprintf("the evaluation ran past its time limit during %s; the process group was killed", phase)
	}
	if phase == "start" {
		msg += r.e.cudaStartHint(r.res.Device, msg+"\n"+tb+"\n"+r.cand.log.String())
	}
	r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message, r.res.Traceback = Fail, cls, phase, msg, tb
	if cls == ClassHarness {
		r.res.Verdict = VerdictError
	}
}

// refFail records a failure of the reference process: no verdict about the kernel. A reference
// that ran out of device memory is a task that does not fit the device (resource).
func (r *evalRun) refFail(phase string, err error) {
	cls, msg, tb := describeErr(err)
	if cls != ClassResource {
		cls = ClassReference
	}
	if claimsDiskFull(err, msg, tb) {
		// The reference runs no kernel code: its word that a write found no room is believed.
		free, _ := workFreeBytes(r.e.opt.WorkDir)
		cls = ClassHarness
		msg = fmt.Sprintf("the reference process found no room to write (the work folder %s has %s free); no verdict about the kernel: %s\n%s",
			r.e.opt.WorkDir, mib(free), folderAdvice(r.e.opt.WorkDir, workSetting), msg)
	}
	r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message, r.res.Traceback = VerdictError, cls, phase, msg, tb
	r.res.Log = r.ref.p.log.String()
	r.ref.p.kill()
}

func (r *evalRun) tamper(found []string) bool {
	for _, f := range found {
		if !slices.Contains(r.res.Tampered, f) {
			r.res.Tampered = append(r.res.Tampered, f)
		}
	}
	return len(r.res.Tampered) > 0
}

func (r *evalRun) execute(k Kernel, device, dir string, cand *workerProc, reference func() (*refServer, error)) {
	e, cfg := r.e, r.e.opt.Config
	taskPath, err := e.writeTask(r.task)
	if err != nil {
		r.res.Verdict, r.res.ErrorClass, r.res.Message = VerdictError, ClassHarness, e.noRoom(err).Error()
		return
	}
	kpath := filepath.Join(dir, "candidate.py")
	if err := os.WriteFile(kpath, []byte(k.Source), 0o600); err != nil {
		r.res.Verdict, r.res.ErrorClass, r.res.Message = VerdictError, ClassHarness, e.noRoom(err).Error()
		return
	}
	r.cand, r.dir = cand.p, dir
	// What the harness put in the folder before any kernel code runs: the kernel's file, its
	// staged builds, the process's own start. The rest is the kernel's.
	r.room.staged = dirBytes(dir)
	var refLog string // the reference's own output explains its failure
	defer func() {
		r.memory()
		cand.p.close()
		r.res.Log = cand.p.log.String()
		if r.res.ErrorClass == ClassReference || r.res.ErrorClass == ClassResource {
			if r.ref != nil {
				refLog = r.ref.p.log.String()
			}
			r.res.Log = "== reference process ==\n" + refLog + "\n== candidate process ==\n" + r.res.Log
		}
	}()
	// The candidate's hello starts its CUDA context; it runs no candidate code, so it need not
	// wait for the reference, only for the one setting the reference decides (whether outputs
	// travel by CUDA IPC), known once the device's first reference has started. On a new task
	// both processes' CUDA starts then overlap instead of running one after the other.
	var early chan error
	if ipc, ok := e.knownIPC(device); ok {
		cand.settings.IPC = ipc
		early = make(chan error, 1)
		go func() {
			_, err := e.hello(r.ctx, cand.p, cand.settings)
			early <- err
		}()
	}
	ref, err := reference()
	r.phases.ReferenceReady = r.since()
	if err != nil {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase = VerdictError, ClassReference, "reference"
		_, r.res.Message, r.res.Traceback = describeErr(err)
		var rf *refFailure
		if errors.As(err, &rf) {
			refLog = rf.log
		}
		r.res.Message += e.cudaStartHint(device, r.res.Message+"\n"+refLog)
		return
	}
	r.ref = ref
	r.res.Fingerprint = e.fingerprint(device, ref.fp)
	// Outputs reach the reference through CUDA IPC where the reference can map them.
	if early == nil {
		cand.settings.IPC = ref.ipc
		_, err = e.hello(r.ctx, cand.p, cand.settings)
	} else {
		err = <-early
		if err == nil && cand.settings.IPC != ref.ipc {
			// The device's earlier references said otherwise: the driver or the GPU changed under
			// a running evaluator. The candidate would send outputs this reference cannot read;
			// the next evaluation starts its candidate with what this reference said.
			e.mu.Lock()
			e.ipc[device] = ref.ipc
			e.mu.Unlock()
			r.res.Verdict, r.res.ErrorClass, r.res.Phase = VerdictError, ClassHarness, "start"
			r.res.Message = fmt.Sprintf("the reference process's CUDA IPC support (%v) differs from what %s's earlier references reported (%v)", ref.ipc, device, cand.settings.IPC)
			return
		}
	}
	if err != nil {
		r.candFail("start", err)
		return
	}
	r.phases.CandidateStart = r.since()

	// Both build the task's model from the same seed. The reference loads first when it has not
	// yet measured the task's footprint (its first evaluation on this device), or when the
	// candidate's load compiles a torch.compile mode (its compile seconds are reported, and are
	// measured with the reference quiet); otherwise both load at once. Either way the task is
	// known to fit the device next to a candidate before any candidate code runs.
	initSeed := int(r.rng.Int64N(1 << 30))
	loadStart := time.Now()
	refLoad := make(chan error, 1)
	loadRef := func() {
		rep, err := call(r.ctx, ref.p, cfg.CompileTimeout, loadRequest{TaskPath: taskPath, InitSeed: initSeed, Mode: ref.mode})
		if err == nil {
			ref.noteLoad(rep)
		}
		refLoad <- err
	}
	serial := r.mode != "eager" || !ref.measured
	if serial {
		loadRef()
		if err := <-refLoad; err != nil {
			r.refFail("reference", err)
			return
		}
		refLoad <- nil
	}
	if msg := ref.fits(); msg != "" {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message = VerdictError, ClassResource, "reference", msg
		return
	}
	// The work folder must hold the task's dumps where tensors travel as files (the CPU, or a
	// GPU without CUDA IPC); the reference, idle here, measured them once (workroom.go).
	if r.room.files = device == "cpu" || !cand.settings.IPC; r.room.files {
		r.room.dumps, r.room.known = e.dumpBytes(r.ctx, ref, r.task, device)
	}
	if msg := e.checkRoom(r.room); msg != "" {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message = VerdictError, ClassHarness, "start", msg
		return
	}
	if !serial {
		go loadRef()
	}
	e.progress("loading %s", k.Name)
	rep, candErr := call(r.ctx, cand.p, cfg.CompileTimeout, loadRequest{TaskPath: taskPath, KernelPath: kpath, InitSeed: initSeed, Mode: r.mode})
	if err := <-refLoad; err != nil {
		r.refFail("reference", err)
		return
	}
	r.phases.Load = time.Since(loadStart).Seconds()
	if candErr != nil {
		r.candFail("load", candErr)
		r.tamper(rep.Tampered)
		r.finish()
		return
	}
	r.tamper(rep.Tampered)
	if rep.ModelCompileS != nil && r.mode != "eager" {
		// Only baselines run a compile mode, and their "candidate" is the task's own Model.
		r.res.ModelCompileS = *rep.ModelCompileS
	}

	// The first look at who else holds the GPU runs beside the correctness trials, which time
	// nothing; the timed calls start only once it has returned (neighbours.go).
	before := r.scanNeighbours(device)
	if !r.correctness() {
		r.blameInputs()
		before.wait()
		r.finish()
		r.tf32Hint(k)
		return
	}
	before.wait()
	// On the CPU, the timed calls take their turn at this host's CPUs with every other
	// kbplatform process's (cputurn.go); the other phases time nothing and need no turn.
	shared := r.cpuTurn(device, func() { r.e.quietSpares(r.timing) })
	if shared != "" && r.res.Timing != nil {
		r.res.AddFlag(Flag{Name: sdk.FlagCPUShared, Reason: shared})
	}
	after := r.scanNeighbours(device)
	if r.evidence && r.res.ErrorClass == "" && len(r.res.Tampered) == 0 {
		// After timing, so that the profiler's setup and teardown cannot touch a timed call; and
		// after the second look, so that nvidia-smi does not run beside the profiled forward.
		after.wait()
		r.profile(k)
	}
	if r.res.Timing != nil {
		r.judgeNeighbours(device, before, after)
	}
	after.wait()
	r.finish()
	r.tf32Hint(k)
}

// tf32Hint adds, to a wrong output of a source that computes fp32 products in TF32, the TF32
// policy's warning (docs/contract.md): measured precision where there is no pass to flag.
func (r *evalRun) tf32Hint(k Kernel) {
	if r.res.ErrorClass == ClassMismatch && usesTF32(k.Source) {
		r.res.Warnings = append(r.res.Warnings, "tf32: the source computes fp32 products in TF32 (Triton's tl.dot does unless input_precision=\"ieee\"), "+
			"whose 10-bit mantissa gives errors near 2^-11 relative: beyond a float32 task's tolerance where the output is wrong by that much")
	}
}

// memory records what both processes held on the device (nothing on the CPU) and each process's
// own account of where its time went.
func (r *evalRun) memory() {
	if r.ref == nil {
		return
	}
	report := func(p *proc) workerMemory {
		if p == nil || p.exited() {
			return workerMemory{}
		}
		rep, err := call(context.Background(), p, 10*time.Second, memoryRequest{})
		if err != nil {
			return workerMemory{}
		}
		return rep.Memory
	}
	ref := report(r.ref.p)
	var cand workerMemory
	switch r.res.ErrorClass {
	case "", ClassMismatch, ClassNondeterm, ClassInputMutated, ClassStreamUnordered, ClassRuntime:
		cand = report(r.cand) // a candidate in another state is not asked
	}
	if r.phases != nil {
		r.phases.ReferenceOps, r.phases.CandidateOps = phaseOps(ref.Ops), phaseOps(cand.Ops)
	}
	if r.ref.footprint == 0 {
		return
	}
	r.res.Memory = memoryUse(r.ref.footprint, r.ref.total, ref, cand)
}

// memoryUse is the record's account of both processes' device memory.
func memoryUse(footprint, total int64, ref, cand workerMemory) *MemoryUse {
	m := &MemoryUse{Footprint: footprint, DeviceTotal: total}
	m.ReferencePeak, m.EvidencePeak, m.ReferenceAllocated = ref.PeakReserved, ref.EvidencePeak, ref.PeakAllocated
	m.CandidatePeak, m.CandidateAllocated = cand.PeakReserved, cand.PeakAllocated
	m.Peak = m.ReferencePeak + m.CandidatePeak
	// Both processes hold the same flush buffer, allocated by the harness before the task or the
	// candidate runs: the reference's size is taken for both, since the candidate's own report
	// comes from a process that ran untrusted code. A candidate that reported nothing held none.
	if m.Harness = ref.Harness; cand.PeakReserved >= ref.Harness && cand.PeakReserved > 0 {
		m.Harness += ref.Harness
	}
	m.Harness = min(m.Harness, m.Peak)
	return m
}
