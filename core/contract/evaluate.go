package contract

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kbplatform/kbplatform/core/contract/worker"
	"github.com/kbplatform/kbplatform/core/pyenv"
	"github.com/kbplatform/kbplatform/sdk"
)

// Error is returned for failures of the harness itself (as opposed to verdicts about a kernel).
var ErrHarness = errors.New("harness error")

// Options configure an Evaluator.
type Options struct {
	Python   *pyenv.Python
	WorkDir  string // scratch space for dumps and rendered tasks; a tmpfs is best
	CacheDir string // extension builds, Triton cache, the extracted worker
	Config   Config
	Progress func(msg string)
	// Recipe carries a backend's build settings: environment for the workers, and flags that the
	// extension-build wrapper adds to every load_inline/load call.
	Recipe *sdk.BuildRecipe
	// HostInfo reads the machine's half of the fingerprint (default: /proc and nvidia-smi).
	HostInfo func(device string) Fingerprint
}

// Evaluator runs the contract on this host. It keeps one clean reference process per task,
// device and mode alive between evaluations (reused, never shared with candidate code).
type Evaluator struct {
	opt    Options
	script string
	*shared
}

// shared is what every Evaluator derived with With uses together: the reference processes, and
// one slot per device that an evaluation or validation holds for its whole run.
type shared struct {
	mu      sync.Mutex
	refs    map[string]*refServer
	devices map[string]chan struct{}
}

// deviceSlot returns the one-slot semaphore of a device. Evaluations on one device run one at a
// time, whoever calls them (a strategy may evaluate samples in parallel): a reference process
// serves one caller at a time, and a timing shares its device with nothing.
func (e *Evaluator) deviceSlot(device string) chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.devices[device]
	if s == nil {
		s = make(chan struct{}, 1)
		e.devices[device] = s
	}
	return s
}

// takeDevice waits for the device's slot; the returned func gives it back. It fails only when ctx
// ends first.
func (e *Evaluator) takeDevice(ctx context.Context, device string) (func(), error) {
	slot := e.deviceSlot(device)
	select {
	case slot <- struct{}{}:
		return func() { <-slot }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type refServer struct {
	p      *proc
	fp     Fingerprint
	dir    string
	mode   string
	key    string
	device string
	users  int       // evaluations using it now; it is never ended under one
	used   time.Time // last handed out, for eviction
}

// liveReferences is how many idle reference processes a device keeps. Each holds its task's
// weights, rotating input sets and allocator cache (GBs for a gpu-size task): one per task would
// hold the whole suite's memory at once during a baseline of every task.
func liveReferences(device string) int {
	if strings.HasPrefix(device, "cuda") {
		return 1
	}
	return 4
}

// evictLocked takes idle reference processes of a device out of the cache, least recently
// used first, until at most liveReferences remain (keep is never taken), and returns them for
// the caller to end once it has let go of e.mu.
func (e *Evaluator) evictLocked(device, keep string) []*refServer {
	var out []*refServer
	for {
		var n int
		var victim *refServer
		for k, r := range e.refs {
			if r.device != device {
				continue
			}
			n++
			if k != keep && r.users == 0 && (victim == nil || r.used.Before(victim.used)) {
				victim = r
			}
		}
		if n <= liveReferences(device) || victim == nil {
			return out
		}
		delete(e.refs, victim.key)
		out = append(out, victim)
	}
}

func endReferences(rs []*refServer) {
	for _, r := range rs {
		r.p.close()
		os.RemoveAll(r.dir)
	}
}

// release hands a reference process back after an evaluation.
func (e *Evaluator) release(r *refServer) {
	e.mu.Lock()
	r.users--
	var done []*refServer
	switch {
	case r.users > 0:
	case e.refs[r.key] != r: // replaced while in use
		done = []*refServer{r}
	default:
		done = e.evictLocked(r.device, "")
	}
	e.mu.Unlock()
	endReferences(done)
}

// New prepares an Evaluator: extracts the worker and creates the scratch folders.
func New(opt Options) (*Evaluator, error) {
	if opt.Python == nil {
		return nil, fmt.Errorf("%w: no python interpreter", ErrHarness)
	}
	if err := opt.Config.Validate(); err != nil {
		return nil, err
	}
	for _, d := range []string{opt.WorkDir, opt.CacheDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrHarness, err)
		}
	}
	script, err := worker.Extract(filepath.Join(opt.CacheDir, "worker"))
	if err != nil {
		return nil, fmt.Errorf("%w: extract worker: %v", ErrHarness, err)
	}
	if opt.Progress == nil {
		opt.Progress = func(string) {}
	}
	if opt.HostInfo == nil {
		opt.HostInfo = DefaultHostInfo
	}
	return &Evaluator{opt: opt, script: script, shared: &shared{refs: map[string]*refServer{}, devices: map[string]chan struct{}{}}}, nil
}

// With returns an Evaluator with another configuration, progress sink and build recipe that
// shares this one's reference processes.
func (e *Evaluator) With(cfg Config, progress func(string), recipe *sdk.BuildRecipe) (*Evaluator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opt := e.opt
	opt.Config, opt.Recipe = cfg, recipe
	if progress != nil {
		opt.Progress = progress
	}
	return &Evaluator{opt: opt, script: e.script, shared: e.shared}, nil
}

// Close ends every reference process.
func (e *Evaluator) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, r := range e.refs {
		r.p.close()
		os.RemoveAll(r.dir)
		delete(e.refs, k)
	}
}

// Config returns the contract configuration in use.
func (e *Evaluator) Config() Config { return e.opt.Config }

func (e *Evaluator) progress(format string, args ...any) {
	e.opt.Progress(fmt.Sprintf(format, args...))
}

// deviceEnv maps a device name to the worker's view of it. A GPU evaluation sees only its GPU.
func deviceEnv(device string) (workerDevice string, env []string, err error) {
	switch {
	case device == "cpu":
		return "cpu", nil, nil
	case strings.HasPrefix(device, "cuda"):
		idx := "0"
		if i := strings.IndexByte(device, ':'); i >= 0 {
			idx = device[i+1:]
		}
		if _, err := strconv.Atoi(idx); err != nil {
			return "", nil, fmt.Errorf("%w: bad device %q", ErrHarness, device)
		}
		return "cuda:0", []string{"CUDA_VISIBLE_DEVICES=" + idx}, nil
	}
	return "", nil, fmt.Errorf("%w: unknown device %q (want cpu or cuda:N)", ErrHarness, device)
}

func (e *Evaluator) spawn(role, device, dir string) (*proc, map[string]any, error) {
	wdev, env, err := deviceEnv(device)
	if err != nil {
		return nil, nil, err
	}
	env = append(env,
		"TRITON_CACHE_DIR="+filepath.Join(e.opt.CacheDir, "triton"),
		"TORCH_EXTENSIONS_DIR="+filepath.Join(e.opt.CacheDir, "torch_extensions"),
	)
	if wdev == "cpu" && e.opt.Config.CPUThreads > 0 {
		env = append(env, "OMP_NUM_THREADS="+strconv.Itoa(e.opt.Config.CPUThreads))
	}
	if r := e.opt.Recipe; r != nil && role == "candidate" {
		keys := make([]string, 0, len(r.Env))
		for k := range r.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			env = append(env, k+"="+r.Env[k])
		}
	}
	p, err := spawn(spawnSpec{Python: e.opt.Python.Path, Script: e.script, Role: role, Dir: dir, Env: env, LogCap: e.opt.Config.LogLimit})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrHarness, err)
	}
	settings := map[string]any{
		"device":      wdev,
		"poison":      e.opt.Config.Poison,
		"flush_cache": e.opt.Config.FlushCache,
		"ext_cache":   filepath.Join(e.opt.CacheDir, "ext"),
	}
	if wdev == "cpu" {
		settings["cpu_threads"] = e.opt.Config.CPUThreads
	}
	if c := e.opt.Python.Capability; c != "" {
		settings["cuda_arch"] = c
	}
	if r := e.opt.Recipe; r != nil && role == "candidate" {
		settings["recipe"] = map[string]any{"cflags": r.CFlags, "cuda_cflags": r.CUDAFlags, "include_paths": r.IncludePaths, "ldflags": r.LDFlags}
	}
	return p, settings, nil
}

func (e *Evaluator) hello(ctx context.Context, p *proc, settings map[string]any) (Fingerprint, error) {
	resp, err := p.call(ctx, e.opt.Config.CallTimeout+time.Minute, map[string]any{"op": "hello", "settings": settings})
	if err != nil {
		return nil, err
	}
	var fp Fingerprint
	if err := json.Unmarshal(resp["fingerprint"], &fp); err != nil {
		return nil, &procError{Class: ClassHarness, Message: "hello without fingerprint"}
	}
	return fp, nil
}

// writeTask puts the rendered task source where workers can read it.
func (e *Evaluator) writeTask(t Task) (string, error) {
	dir := filepath.Join(e.opt.WorkDir, "tasks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, t.Hash[:16]+".py")
	if b, err := os.ReadFile(path); err == nil && string(b) == t.Source {
		return path, nil
	}
	f, err := os.CreateTemp(dir, ".task-*")
	if err != nil {
		return "", err
	}
	_, werr := f.WriteString(t.Source)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		os.Remove(f.Name())
		return "", errors.Join(werr, cerr)
	}
	return path, os.Rename(f.Name(), path)
}

// refKey identifies a reference process: the task, where it runs, how, and the settings it was
// started with.
func (e *Evaluator) refKey(t Task, device, mode string) string {
	c := e.opt.Config
	return fmt.Sprintf("%s|%s|%s|flush=%v|poison=%v|threads=%d", t.Hash, device, mode, c.FlushCache, c.Poison, c.CPUThreads)
}

// reference returns the clean reference process for a task, starting it if needed. The caller
// hands it back with release.
func (e *Evaluator) reference(ctx context.Context, t Task, device, mode string) (*refServer, error) {
	key := e.refKey(t, device, mode)
	e.mu.Lock()
	r := e.refs[key]
	if r != nil && !r.p.exited() {
		r.users++
		r.used = time.Now()
		e.mu.Unlock()
		return r, nil
	}
	e.mu.Unlock()
	dir, err := os.MkdirTemp(e.opt.WorkDir, "ref-")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHarness, err)
	}
	p, settings, err := e.spawn("reference", device, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	fp, err := e.hello(ctx, p, settings)
	if err != nil {
		log := p.log.String()
		p.close()
		os.RemoveAll(dir)
		return nil, &refFailure{err: err, log: log}
	}
	r = &refServer{p: p, fp: fp, dir: dir, mode: mode, key: key, device: device, users: 1, used: time.Now()}
	e.mu.Lock()
	var done []*refServer
	if old := e.refs[key]; old != nil && old.users == 0 {
		done = append(done, old)
	}
	e.refs[key] = r
	// Make room before this one loads its task: the processes it displaces free their memory.
	done = append(done, e.evictLocked(device, key)...)
	e.mu.Unlock()
	endReferences(done)
	return r, nil
}

// refFailure wraps an error of the reference process: the task, not the kernel, is at fault.
type refFailure struct {
	err error
	log string
}

func (r *refFailure) Error() string { return "reference: " + r.err.Error() }
func (r *refFailure) Unwrap() error { return r.err }

// seedSource draws the seeds of one evaluation. Fresh seeds per evaluation mean a candidate
// cannot be tuned to known inputs; Config.Seed fixes them for reproduction.
func (e *Evaluator) seedSource() (*mrand.Rand, int64) {
	s := e.opt.Config.Seed
	if s == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		s = int64(binary.LittleEndian.Uint64(b[:]) >> 2)
		if s == 0 {
			s = 1
		}
	}
	return mrand.New(mrand.NewPCG(uint64(s), 0x6b6270)), s
}

// Compile imports the candidate in its own process on the CPU side, filling the build cache.
func (e *Evaluator) Compile(ctx context.Context, t Task, k Kernel, device string) *CompileResult {
	start := time.Now()
	res := &CompileResult{}
	fail := func(class, msg, tb, log string) *CompileResult {
		res.OK, res.ErrorClass, res.Message, res.Traceback, res.Log = false, class, msg, tb, log
		res.Duration = time.Since(start)
		return res
	}
	dir, err := os.MkdirTemp(e.opt.WorkDir, "compile-")
	if err != nil {
		return fail(ClassHarness, err.Error(), "", "")
	}
	defer os.RemoveAll(dir)
	taskPath, err := e.writeTask(t)
	if err != nil {
		return fail(ClassHarness, err.Error(), "", "")
	}
	kpath := filepath.Join(dir, "candidate.py")
	if err := os.WriteFile(kpath, []byte(k.Source), 0o600); err != nil {
		return fail(ClassHarness, err.Error(), "", "")
	}
	p, settings, err := e.spawn("candidate", device, dir)
	if err != nil {
		return fail(ClassHarness, err.Error(), "", "")
	}
	defer p.close()
	if _, err := e.hello(ctx, p, settings); err != nil {
		return fail(classOf(err), err.Error(), "", p.log.String())
	}
	resp, err := p.call(ctx, e.opt.Config.CompileTimeout, map[string]any{"op": "load", "task_path": taskPath, "kernel_path": kpath, "build": false})
	if err != nil {
		cls, msg, tb := describeErr(err)
		return fail(cls, msg, tb, p.log.String())
	}
	_ = json.Unmarshal(resp["ext_builds"], &res.Builds)
	_ = json.Unmarshal(resp["ext_hits"], &res.CacheHits)
	if tampered := stringList(resp["tampered"]); len(tampered) > 0 {
		return fail(ClassTampering, "harness functions were replaced at import: "+strings.Join(tampered, ", "), "", p.log.String())
	}
	res.OK = true
	res.Log = p.log.String()
	res.Duration = time.Since(start)
	return res
}

func classOf(err error) string {
	var pe *procError
	var we *workerError
	switch {
	case errors.As(err, &pe):
		return pe.Class
	case errors.As(err, &we):
		return we.Class
	case errors.Is(err, context.DeadlineExceeded):
		return ClassTimeout
	}
	return ClassHarness
}

func describeErr(err error) (class, msg, tb string) {
	var we *workerError
	if errors.As(err, &we) {
		return we.Class, we.Message, we.Traceback
	}
	var pe *procError
	if errors.As(err, &pe) {
		return pe.Class, pe.Message, ""
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ClassTimeout, "the evaluation ran past its time limit; the process group was killed", ""
	}
	return classOf(err), err.Error(), ""
}

func stringList(raw json.RawMessage) []string {
	var s []string
	_ = json.Unmarshal(raw, &s)
	return s
}

func intList(raw json.RawMessage) []int {
	var s []int
	_ = json.Unmarshal(raw, &s)
	return s
}

// evalRun carries the state of one evaluation.
type evalRun struct {
	e       *Evaluator
	ctx     context.Context
	res     *Result
	task    Task
	ref     *refServer
	cand    *proc
	dumpDir string
	rng     *mrand.Rand
	mode    string // how the candidate's module is run: eager, or a torch.compile mode (baselines)
}

// Evaluate runs the full contract for one kernel on one task and device. It never returns nil;
// failures of the harness itself give Verdict "error".
func (e *Evaluator) Evaluate(ctx context.Context, t Task, k Kernel, device string, compiled *CompileResult) *Result {
	return e.evaluate(ctx, t, k, device, compiled, "eager")
}

func (e *Evaluator) evaluate(parent context.Context, t Task, k Kernel, device string, compiled *CompileResult, mode string) *Result {
	res := e.run(parent, t, k, device, compiled, mode)
	if parent.Err() != nil && res.Verdict != Pass {
		// Stopped from outside (Ctrl-C, a deadline of the caller): whatever failed, it says
		// nothing about the kernel.
		res.Verdict, res.ErrorClass, res.Phase = VerdictError, ClassInterrupted, "interrupted"
		res.Message = "the evaluation was interrupted before it finished: " + parent.Err().Error()
	}
	return res
}

func (e *Evaluator) run(ctx context.Context, t Task, k Kernel, device string, compiled *CompileResult, mode string) *Result {
	cfg := e.opt.Config
	res := &Result{Contract: Version, Task: t, Kernel: k, Device: device, Config: cfg, StartedAt: time.Now().UTC()}
	// Wait for the device before the evaluation's time limit starts: waiting is not the kernel's.
	giveBack, err := e.takeDevice(ctx, device)
	if err != nil {
		res.Verdict, res.ErrorClass, res.Message = VerdictError, ClassInterrupted, "stopped while waiting for "+device
		res.FinishedAt = time.Now().UTC()
		return res
	}
	defer giveBack()
	res.StartedAt = time.Now().UTC()
	defer func() { res.FinishedAt = time.Now().UTC() }() // before the slot is given back
	timeout := cfg.Timeout
	if t.Timeout > 0 {
		timeout = t.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	dir, err := os.MkdirTemp(e.opt.WorkDir, "eval-")
	if err != nil {
		res.Verdict, res.ErrorClass, res.Message = VerdictError, ClassHarness, err.Error()
		return res
	}
	defer os.RemoveAll(dir)
	dumpDir := filepath.Join(dir, "out")
	if err := os.Mkdir(dumpDir, 0o700); err != nil {
		res.Verdict, res.ErrorClass, res.Message = VerdictError, ClassHarness, err.Error()
		return res
	}

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
	if compiled == nil {
		e.progress("compiling %s", k.Name)
		compiled = e.Compile(ctx, t, k, device)
	}
	res.Compile = compiled
	if !compiled.OK {
		res.Verdict, res.ErrorClass, res.Phase = Fail, compiled.ErrorClass, "compile"
		res.Message, res.Traceback, res.Log = compiled.Message, compiled.Traceback, compiled.Log
		if compiled.ErrorClass == ClassHarness {
			res.Verdict = VerdictError
		}
		return res
	}
	rng, seed := e.seedSource()
	res.Config.Seed = seed
	run := &evalRun{e: e, ctx: ctx, res: res, task: t, dumpDir: dumpDir, rng: rng, mode: mode}
	run.execute(k, device, dir, ref.wait)
	return res
}

// pendingRef is a reference process being started; wait returns it once started (as often as
// asked).
type pendingRef struct {
	c   chan struct{}
	ref *refServer
	err error
}

func startReference(start func() (*refServer, error)) *pendingRef {
	p := &pendingRef{c: make(chan struct{})}
	go func() {
		p.ref, p.err = start()
		close(p.c)
	}()
	return p
}

func (p *pendingRef) wait() (*refServer, error) {
	<-p.c
	return p.ref, p.err
}

// candFail records a failure caused by the candidate process.
func (r *evalRun) candFail(phase string, err error) {
	cls, msg, tb := describeErr(err)
	if r.ctx.Err() != nil {
		cls, msg = ClassTimeout, fmt.Sprintf("the evaluation ran past its time limit during %s; the process group was killed", phase)
	}
	r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message, r.res.Traceback = Fail, cls, phase, msg, tb
	if cls == ClassHarness {
		r.res.Verdict = VerdictError
	}
}

// refFail records a failure of the reference process: no verdict about the kernel.
func (r *evalRun) refFail(phase string, err error) {
	_, msg, tb := describeErr(err)
	r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message, r.res.Traceback = VerdictError, ClassReference, phase, msg, tb
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

func (r *evalRun) execute(k Kernel, device, dir string, reference func() (*refServer, error)) {
	e, cfg := r.e, r.e.opt.Config
	taskPath, err := e.writeTask(r.task)
	if err != nil {
		r.res.Verdict, r.res.ErrorClass, r.res.Message = VerdictError, ClassHarness, err.Error()
		return
	}
	kpath := filepath.Join(dir, "candidate.py")
	if err := os.WriteFile(kpath, []byte(k.Source), 0o600); err != nil {
		r.res.Verdict, r.res.ErrorClass, r.res.Message = VerdictError, ClassHarness, err.Error()
		return
	}
	// The candidate's process imports torch while the reference's start finishes.
	cand, settings, err := e.spawn("candidate", device, dir)
	if err != nil {
		r.res.Verdict, r.res.ErrorClass, r.res.Message = VerdictError, ClassHarness, err.Error()
		return
	}
	r.cand = cand
	var refLog string // the reference's own output explains its failure
	defer func() {
		cand.close()
		r.res.Log = cand.log.String()
		if r.res.ErrorClass == ClassReference {
			if r.ref != nil {
				refLog = r.ref.p.log.String()
			}
			r.res.Log = "== reference process ==\n" + refLog + "\n== candidate process ==\n" + r.res.Log
		}
	}()
	ref, err := reference()
	if err != nil {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase = VerdictError, ClassReference, "reference"
		_, r.res.Message, r.res.Traceback = describeErr(err)
		var rf *refFailure
		if errors.As(err, &rf) {
			refLog = rf.log
		}
		return
	}
	r.ref = ref
	r.res.Fingerprint = e.fingerprint(device, ref.fp)
	if _, err := e.hello(r.ctx, cand, settings); err != nil {
		r.candFail("start", err)
		return
	}

	// Both build the task's model from the same seed. They load at once, except when the
	// candidate's load compiles a torch.compile mode: its compile seconds are reported, and are
	// measured with the reference quiet.
	initSeed := int(r.rng.Int64N(1 << 30))
	refLoad := make(chan error, 1)
	loadRef := func() {
		_, err := ref.p.call(r.ctx, cfg.CompileTimeout, map[string]any{"op": "load", "task_path": taskPath, "init_seed": initSeed, "mode": ref.mode})
		refLoad <- err
	}
	if r.mode == "eager" {
		go loadRef()
	} else {
		loadRef()
	}
	e.progress("loading %s", k.Name)
	resp, candErr := cand.call(r.ctx, cfg.CompileTimeout, map[string]any{"op": "load", "task_path": taskPath, "kernel_path": kpath, "init_seed": initSeed, "mode": r.mode})
	if err := <-refLoad; err != nil {
		r.refFail("reference", err)
		return
	}
	if candErr != nil {
		r.candFail("load", candErr)
		r.tamper(stringList(resp["tampered"]))
		r.finish()
		return
	}
	r.tamper(stringList(resp["tampered"]))
	if raw, ok := resp["model_compile_s"]; ok && r.mode != "eager" {
		// Only baselines run a compile mode, and their "candidate" is the task's own Model.
		_ = json.Unmarshal(raw, &r.res.ModelCompileS)
	}

	if !r.correctness() {
		r.finish()
		return
	}
	r.timing()
	r.finish()
}

// correctness runs seeds × distributions trials; it returns false when timing is pointless.
func (r *evalRun) correctness() bool {
	e, cfg := r.e, r.e.opt.Config
	dists := r.task.Distributions
	if len(dists) == 0 {
		dists = []string{"default", "scaled"}
	}
	n := 0
	total := len(dists) * cfg.Seeds
	for _, dist := range dists {
		for s := 0; s < cfg.Seeds; s++ {
			n++
			e.progress("correctness trial %d/%d (%s)", n, total, dist)
			seed := int(r.rng.Int64N(1 << 30))
			repeat := 1
			if s == 0 {
				repeat = 2 // the same input twice: a nondeterminism check once per distribution
			}
			base := filepath.Join(r.dumpDir, fmt.Sprintf("t%d", n))
			dumps := []string{base + "r0", base + "r1"}
			cmd := map[string]any{"op": "trial", "seed": seed, "dist": dist, "repeat": repeat, "dumps": dumps[:repeat]}
			if s == 0 {
				cmd["inputs_dump"] = base + "in"
			}
			resp, err := r.cand.call(r.ctx, cfg.CallTimeout, cmd)
			if err != nil {
				r.tamper(stringList(resp["tampered"]))
				r.candFail("correctness", err)
				return false
			}
			if r.tamper(stringList(resp["tampered"])) {
				return false
			}
			tr := Trial{Seed: seed, Dist: dist, OK: true, Repeated: repeat > 1}
			if mut := intList(resp["mutated"]); len(mut) > 0 {
				tr.InputChanged = mut
			}
			var outputs []json.RawMessage
			_ = json.Unmarshal(resp["outputs"], &outputs)
			if len(outputs) != repeat {
				r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassTampering, "correctness"
				r.res.Message = "the trial reply does not carry the outputs the harness wrote"
				return false
			}
			ccmd := map[string]any{"op": "compare", "seed": seed, "dist": dist, "output": outputs[0], "strides": r.task.Strides}
			if r.task.Tolerance != nil {
				ccmd["tolerance"] = r.task.Tolerance
			}
			if repeat > 1 {
				ccmd["repeat"] = outputs[1]
			}
			if raw, ok := resp["inputs"]; ok {
				ccmd["inputs"] = raw
			}
			for _, m := range append(outputs, resp["inputs"]) {
				if m != nil && !r.manifestInside(m) {
					r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassTampering, "correctness"
					r.res.Message = "an output manifest points outside the evaluation's dump folder"
					return false
				}
			}
			cres, err := r.ref.p.call(r.ctx, cfg.CallTimeout, ccmd)
			r.clearDumps()
			if err != nil {
				var we *workerError
				if errors.As(err, &we) && we.Class == ClassHarness && strings.Contains(we.Message, "TensorFileError") {
					// The candidate's dump was unreadable: not a reference failure.
					r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message = Fail, ClassTampering, "correctness", "the candidate's output files are not what the harness wrote: "+we.Message
					return false
				}
				r.refFail("compare", err)
				return false
			}
			r.applyCompare(&tr, cres, "correctness", 0)
			r.res.Trials = append(r.res.Trials, tr)
		}
	}
	if r.res.ErrorClass != "" {
		return false
	}
	for _, tr := range r.res.Trials {
		if !tr.OK || len(tr.InputChanged) > 0 || (tr.Consistent != nil && !*tr.Consistent) {
			return false // incorrect kernels are not timed
		}
	}
	return true
}

type compareReply struct {
	Result struct {
		OK      bool             `json:"ok"`
		Kind    string           `json:"kind"`
		Message string           `json:"message"`
		Leaves  []map[string]any `json:"leaves"`
	} `json:"result"`
	RepeatResult *struct {
		OK      bool   `json:"ok"`
		Message string `json:"message"`
	} `json:"repeat_result"`
	RepeatConsistent *bool  `json:"repeat_consistent"`
	RepeatMessage    string `json:"repeat_message"`
	InputsChanged    []int  `json:"inputs_changed"`
}

func decodeCompare(raw map[string]json.RawMessage) compareReply {
	var c compareReply
	b, _ := json.Marshal(raw)
	_ = json.Unmarshal(b, &c)
	return c
}

// applyCompare folds a comparison reply into the trial and the result's first failure.
func (r *evalRun) applyCompare(tr *Trial, raw map[string]json.RawMessage, phase string, call int) {
	c := decodeCompare(raw)
	if len(c.InputsChanged) > 0 {
		for _, i := range c.InputsChanged {
			if !slices.Contains(tr.InputChanged, i) {
				tr.InputChanged = append(tr.InputChanged, i)
			}
		}
	}
	if c.RepeatConsistent != nil {
		tr.Consistent = c.RepeatConsistent
	}
	if !c.Result.OK {
		tr.OK, tr.Kind, tr.Message = false, c.Result.Kind, c.Result.Message
	} else if c.RepeatResult != nil && !c.RepeatResult.OK {
		tr.OK, tr.Kind, tr.Message = false, "values", "second call on the same input: "+c.RepeatResult.Message
	}
	if !tr.OK && r.res.Mismatch == nil {
		m := &Mismatch{Phase: phase, Seed: tr.Seed, Dist: tr.Dist, Call: call, Kind: tr.Kind, Message: tr.Message}
		for _, leaf := range c.Result.Leaves {
			if ok, _ := leaf["ok"].(bool); !ok {
				m.Detail = leaf
				break
			}
		}
		r.res.Mismatch = m
	}
	if tr.Consistent != nil && !*tr.Consistent {
		w := "two calls on identical inputs gave different results: " + c.RepeatMessage
		if !slices.Contains(r.res.Warnings, w) {
			r.res.Warnings = append(r.res.Warnings, w)
		}
	}
}

// manifestInside checks that every tensor path of a manifest lies in the dump folder.
func (r *evalRun) manifestInside(raw json.RawMessage) bool {
	var m struct {
		Leaves []struct {
			Tensor *string `json:"tensor"`
		} `json:"leaves"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return false
	}
	prefix := filepath.Clean(r.dumpDir) + string(filepath.Separator)
	for _, l := range m.Leaves {
		if l.Tensor != nil && !strings.HasPrefix(filepath.Clean(*l.Tensor), prefix) {
			return false
		}
	}
	return true
}

func (r *evalRun) clearDumps() {
	entries, _ := os.ReadDir(r.dumpDir)
	for _, en := range entries {
		os.Remove(filepath.Join(r.dumpDir, en.Name()))
	}
}

// timedSeries is what one run of timed calls (or empty calls) produced.
type timedSeries struct {
	dev, wall []float64 // device and driver-wall samples in ms, one per call
	mutated   []int     // inputs changed in place by any call
	threaded  []int     // calls that returned while a thread they started was still running
	// kernelClock: the wall samples come from the kernel's send stamps on the clock channel.
	kernelClock bool
}

// solo runs f with other's process group stopped, and lets it run again afterwards.
func solo(other *proc, f func()) {
	other.pause()
	defer other.resume()
	f()
}

// extend appends the series o, whose first call has index offset among the timed calls (the
// two sides alternate, so each side's timed calls come in many short series).
func (ts timedSeries) extend(o timedSeries, offset int) timedSeries {
	ts.dev = slices.Concat(ts.dev, o.dev)
	ts.wall = slices.Concat(ts.wall, o.wall)
	ts.mutated = slices.Clone(ts.mutated)
	ts.threaded = slices.Clone(ts.threaded)
	for _, m := range o.mutated {
		if !slices.Contains(ts.mutated, m) {
			ts.mutated = append(ts.mutated, m)
		}
	}
	for _, i := range o.threaded {
		ts.threaded = append(ts.threaded, offset+i)
	}
	return ts
}

// series times n calls (or empty calls).
func (r *evalRun) series(p *proc, n int, seeds []int, noop bool) (timedSeries, error) {
	cfg := r.e.opt.Config
	var ts timedSeries
	for i := 0; i < n; i++ {
		cmd := map[string]any{"op": "timed", "seed": 0, "dist": "default", "noop": noop}
		if seeds != nil {
			cmd["seed"] = seeds[i]
		}
		resp, err := p.call(r.ctx, cfg.CallTimeout, cmd)
		if err != nil {
			return ts, err
		}
		armed, finished, err := p.clock.bracket(p.seq)
		if err != nil {
			p.kill()
			return ts, &procError{Class: ClassTampering, Message: err.Error()}
		}
		if finished.at.Before(armed.at) {
			return ts, &procError{Class: ClassTampering, Message: "timed call's end mark precedes its start mark on the clock channel"}
		}
		ts.kernelClock = armed.kernel && finished.kernel
		var d float64
		if jerr := json.Unmarshal(resp["device_ms"], &d); jerr != nil || math.IsNaN(d) || d < 0 {
			return ts, &procError{Class: ClassTampering, Message: "timed call reported an invalid device time"}
		}
		ts.dev = append(ts.dev, d)
		ts.wall = append(ts.wall, float64(finished.at.Sub(armed.at).Nanoseconds())/1e6)
		for _, m := range intList(resp["mutated"]) {
			if !slices.Contains(ts.mutated, m) {
				ts.mutated = append(ts.mutated, m)
			}
		}
		var started int
		if json.Unmarshal(resp["threads_started"], &started) == nil && started > 0 {
			ts.threaded = append(ts.threaded, i)
		}
	}
	if err := p.clock.quiet(); err != nil {
		p.kill()
		return ts, &procError{Class: ClassTampering, Message: err.Error()}
	}
	return ts, nil
}

// timing times the reference and the candidate the same way, re-checks a few timed outputs the
// candidate cannot predict, and bounds the reported device times by the driver's wall clock.
func (r *evalRun) timing() {
	e, cfg := r.e, r.e.opt.Config
	n := cfg.TimedCalls
	seeds := make([]int, cfg.Warmup+n)
	for i := range seeds {
		seeds[i] = int(r.rng.Int64N(1 << 30))
	}
	check := map[int]bool{}
	for _, i := range r.rng.Perm(n)[:cfg.CheckCalls] {
		check[i] = true
	}
	tm := &Timing{Warmup: cfg.Warmup}

	// Both sides warm up, then their timed calls alternate one by one (reference, candidate,
	// candidate, reference, ...). The device's speed drifts: on the H200, memory-bound kernels run
	// 3-5% slower for stretches of 0.5-3 s, so two series timed one after the other can differ by
	// that much with identical code. Alternating puts both sides in the same stretches.
	// Every timed, empty or warm-up call runs with the other side's process group stopped: nothing
	// the idle process, or a process or thread it started, does can run next to it.
	e.progress("timing reference and candidate (%d calls each, alternating)", n)
	var refNoop, candNoop, warm timedSeries
	var err error
	solo(r.cand, func() {
		refNoop, err = r.series(r.ref.p, cfg.NoopCalls, nil, true)
		if err == nil {
			_, err = r.series(r.ref.p, cfg.Warmup, seeds[:cfg.Warmup], false)
		}
	})
	if err != nil {
		r.refFail("reference timing", err)
		return
	}
	solo(r.ref.p, func() { candNoop, err = r.series(r.cand, cfg.NoopCalls, nil, true) })
	if err != nil {
		r.candFail("timing", err)
		return
	}
	solo(r.ref.p, func() { warm, err = r.series(r.cand, cfg.Warmup, seeds[:cfg.Warmup], false) })
	if err != nil {
		r.candFail("warmup", err)
		return
	} else if len(warm.mutated) > 0 {
		r.noteMutation(warm.mutated, "warmup")
		return
	}
	var checkErr error
	var threaded []int
	after := func(i int, leftThread bool) bool {
		if leftThread {
			threaded = append(threaded, i)
			if msg, tampered := threadCheck(threaded, i+1); tampered {
				r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message = Fail, ClassTampering, "timing", msg
				checkErr = errors.New("tampering")
				return false
			}
		}
		if !check[i] {
			return true
		}
		tm.Checked++
		ok, err := r.recheck(i, seeds[cfg.Warmup+i])
		if err != nil {
			checkErr = err
			if leftThread && r.res.ErrorClass == ClassMismatch {
				r.res.ErrorClass = ClassTampering
				r.res.Message += "; the call had returned while a thread it started was still running: work left in the background, outside the timed region"
			}
			return false
		}
		return ok
	}
	var ref, cand timedSeries
	timeRef := func(i int) bool {
		var s timedSeries
		solo(r.cand, func() { s, err = r.series(r.ref.p, 1, seeds[cfg.Warmup+i:cfg.Warmup+i+1], false) })
		if err != nil {
			r.refFail("reference timing", err)
			return false
		}
		ref = ref.extend(s, i)
		return true
	}
	timeCand := func(i int) bool {
		var s timedSeries
		solo(r.ref.p, func() { s, err = r.series(r.cand, 1, seeds[cfg.Warmup+i:cfg.Warmup+i+1], false) })
		if err != nil {
			r.candFail("timing", err)
			return false
		}
		cand = cand.extend(s, i)
		if len(s.mutated) > 0 {
			r.noteMutation(s.mutated, "timing")
		}
		// The re-check needs the reference running; a failed one has recorded its verdict.
		if !after(i, len(s.threaded) > 0) {
			return false
		}
		return checkErr == nil && r.res.ErrorClass == ""
	}
	for i := 0; i < n; i++ {
		first, second := timeRef, timeCand
		if i%2 == 1 {
			first, second = timeCand, timeRef
		}
		if !first(i) || !second(i) {
			return
		}
	}
	if msg, _ := threadCheck(cand.threaded, len(cand.dev)); msg != "" {
		r.res.Warnings = append(r.res.Warnings, "candidate: "+msg)
	}
	resp, err := r.cand.call(r.ctx, cfg.CallTimeout, map[string]any{"op": "guard"})
	if err != nil {
		r.candFail("timing", err)
		return
	}
	if r.tamper(stringList(resp["tampered"])) {
		return
	}

	tm.Candidate, tm.Reference = Summarize(cand.dev), Summarize(ref.dev)
	tm.CandidateWall, tm.ReferenceWall = Summarize(cand.wall), Summarize(ref.wall)
	tm.Overhead = Summarize(candNoop.wall)
	if cfg.KeepSamples {
		tm.Samples, tm.RefSamples = cand.dev, ref.dev
	}
	if tm.Candidate.Median > 0 {
		tm.Speedup = tm.Reference.Median / tm.Candidate.Median
	}
	r.res.Timing = tm
	msg, forged := wallCheck(cand, candNoop)
	if forged {
		// A loaded machine can delay every call of one series. Before calling the timing forged,
		// time a second series on fresh inputs and judge both together: a forgery hides work in
		// every call of both, scheduling noise does not.
		e.progress("timing disagrees with the driver's clock; timing the candidate again to confirm")
		more := make([]int, n)
		for i := range more {
			more[i] = int(r.rng.Int64N(1 << 30))
		}
		var again, againNoop timedSeries
		solo(r.ref.p, func() {
			againNoop, err = r.series(r.cand, cfg.NoopCalls, nil, true)
			if err == nil {
				again, err = r.series(r.cand, n, more, false)
			}
		})
		if err != nil {
			r.candFail("timing", err)
			return
		}
		msg, forged = wallCheck(cand.extend(again, n), candNoop.extend(againNoop, len(candNoop.dev)))
	}
	if forged {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase, r.res.Message = Fail, ClassTampering, "timing", msg
	} else if msg != "" {
		r.res.Warnings = append(r.res.Warnings, "candidate: "+msg)
	}
	if msg, _ := wallCheck(ref, refNoop); msg != "" {
		r.res.Warnings = append(r.res.Warnings, "reference: "+msg)
	}
	if tm.Candidate.CV > 0.1 {
		r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("candidate timing is noisy (CV %.1f%%)", 100*tm.Candidate.CV))
	}
	if tm.Reference.CV > 0.1 {
		r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("reference timing is noisy (CV %.1f%%)", 100*tm.Reference.CV))
	}
}

func (r *evalRun) noteMutation(idx []int, phase string) {
	if r.res.ErrorClass != "" {
		return
	}
	sort.Ints(idx)
	r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassInputMutated, phase
	r.res.Message = fmt.Sprintf("the candidate changed its input(s) %v during %s calls", idx, phase)
}

// recheck dumps the output of timed call i and compares it with the reference for its seed.
func (r *evalRun) recheck(i, seed int) (bool, error) {
	cfg := r.e.opt.Config
	base := filepath.Join(r.dumpDir, fmt.Sprintf("timed%d", i))
	resp, err := r.cand.call(r.ctx, cfg.CallTimeout, map[string]any{"op": "dump_last", "dump": base})
	if err != nil {
		r.candFail("timing", err)
		return false, err
	}
	if r.tamper(stringList(resp["tampered"])) {
		return false, errors.New("tampering")
	}
	var late bool
	_ = json.Unmarshal(resp["late_writes"], &late)
	if late {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassTampering, "timing"
		r.res.Message = fmt.Sprintf("the output of timed call %d kept changing after the call returned: work was left running in the background, outside the timed region", i)
		return false, errors.New("tampering")
	}
	out := resp["output"]
	if !r.manifestInside(out) {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassTampering, "timing"
		r.res.Message = "an output manifest points outside the evaluation's dump folder"
		return false, errors.New("tampering")
	}
	ccmd := map[string]any{"op": "compare", "seed": seed, "dist": "default", "output": out, "strides": r.task.Strides}
	if r.task.Tolerance != nil {
		ccmd["tolerance"] = r.task.Tolerance
	}
	cres, err := r.ref.p.call(r.ctx, cfg.CallTimeout, ccmd)
	r.clearDumps()
	if err != nil {
		r.refFail("timing re-check", err)
		return false, err
	}
	tr := Trial{Seed: seed, Dist: "default", OK: true}
	r.applyCompare(&tr, cres, "timing", i)
	if !tr.OK {
		r.res.Verdict, r.res.ErrorClass, r.res.Phase = Fail, ClassMismatch, "timing"
		r.res.Message = fmt.Sprintf("timed call %d returned a wrong result (correctness trials had passed): %s", i, tr.Message)
		return false, errors.New("mismatch")
	}
	return true, nil
}

// threadCheck judges the calls that returned while a thread they had started was still running.
// One such call can be a worker pool growing late; a pattern of them is work moved off the timed
// region into the background.
func threadCheck(threaded []int, calls int) (msg string, tampered bool) {
	switch {
	case len(threaded) >= 2:
		return fmt.Sprintf("timed call %d returned while a thread it had started was still running (%d of %d timed calls did): work left in the background is outside the timed region", threaded[0], len(threaded), calls), true
	case len(threaded) == 1:
		return fmt.Sprintf("timed call %d returned while a thread it had started was still running", threaded[0]), false
	}
	return "", false
}

// wallCheck bounds the reported device times by the driver's own clock.
//
// For every call the driver sees wall_i - dev_i: time it waited that the reported device time does
// not explain. For an honest call that is the channel's round trip plus scheduling delay, which is
// what an empty call costs too; for a forged one (a patched timer, work hidden from the events)
// the hidden work is added on every call. Scheduling delay on a loaded machine only ever adds to
// some calls, so the check uses the least unexplained time over all calls, minus the least over
// the empty calls: a forgery shows up in every call, noise does not.
func wallCheck(calls, noop timedSeries) (msg string, forged bool) {
	if len(calls.dev) == 0 || len(noop.dev) == 0 {
		return "", false
	}
	gap := func(ts timedSeries) (least, median float64) {
		g := make([]float64, len(ts.dev))
		for i := range ts.dev {
			g[i] = ts.wall[i] - ts.dev[i]
		}
		st := Summarize(g)
		return st.Min, st.Median
	}
	callLeast, callMedian := gap(calls)
	noopLeast, noopMedian := gap(noop)
	hidden := callLeast - noopLeast
	dev := Summarize(calls.dev).Median
	switch {
	case hidden > 0.05 && hidden > dev:
		return fmt.Sprintf("even the call the driver saw finish fastest took %.4f ms more than its reported device time explains (reported median %.4f ms): timing forged", hidden, dev), true
	case callMedian-noopMedian > 0.02+0.25*dev:
		return fmt.Sprintf("calls took a median %.4f ms longer than their reported device time (median %.4f ms) and than an empty call; the machine may be loaded", callMedian-noopMedian, dev), false
	case callLeast < noopLeast-0.05-0.25*dev:
		return fmt.Sprintf("reported device time (median %.4f ms) exceeds the driver's wall clock for the same calls", dev), false
	}
	return "", false
}

// finish decides the verdict from everything gathered, in a fixed order of precedence.
func (r *evalRun) finish() {
	res := r.res
	if len(res.Tampered) > 0 {
		res.Verdict, res.ErrorClass = Fail, ClassTampering
		if res.Phase == "" {
			res.Phase = "guard"
		}
		res.Message = "the candidate replaced harness functions: " + strings.Join(res.Tampered, ", ")
		return
	}
	if res.ErrorClass != "" {
		if res.Verdict == "" {
			res.Verdict = Fail
		}
		return
	}
	var mutated []int
	for _, tr := range res.Trials {
		for _, i := range tr.InputChanged {
			if !slices.Contains(mutated, i) {
				mutated = append(mutated, i)
			}
		}
	}
	if len(mutated) > 0 {
		sort.Ints(mutated)
		res.Verdict, res.ErrorClass, res.Phase = Fail, ClassInputMutated, "correctness"
		res.Message = fmt.Sprintf("the candidate changed its input(s) %v in place", mutated)
		return
	}
	failed, inconsistent := 0, 0
	for _, tr := range res.Trials {
		if !tr.OK {
			failed++
		}
		if tr.Consistent != nil && !*tr.Consistent {
			inconsistent++
		}
	}
	if inconsistent > 0 {
		res.Verdict, res.ErrorClass, res.Phase = Fail, ClassNondeterm, "correctness"
		res.Message = fmt.Sprintf("two calls on identical inputs gave results that differ beyond tolerance (%d of %d checks)", inconsistent, len(res.Trials))
		return
	}
	if failed > 0 {
		res.Verdict, res.ErrorClass, res.Phase = Fail, ClassMismatch, "correctness"
		res.Message = fmt.Sprintf("wrong on %d of %d trials; first: %s", failed, len(res.Trials), res.Mismatch.Message)
		return
	}
	res.Verdict = Pass
}
