package contract

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kbplatform/kbplatform/internal/contract/worker"
	"github.com/kbplatform/kbplatform/internal/cudadev"
	"github.com/kbplatform/kbplatform/internal/footprint"
	"github.com/kbplatform/kbplatform/internal/gpulock"
	"github.com/kbplatform/kbplatform/internal/pyenv"
	"github.com/kbplatform/kbplatform/internal/sandbox"
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
	// GPUProcesses lists the processes that hold a context on a CUDA device, for the check that
	// no program outside kbplatform shares the GPU with the timed calls (neighbours.go; default:
	// nvidia-smi).
	GPUProcesses func(device string) ([]GPUProcess, error)
	// Spares: start the next evaluation's candidate process ahead (spare.go). Default: on GPUs,
	// whose hosts have cores to spare; on the CPU a torch import beside a timing would slow it.
	Spares SpareMode
	// Sandbox is how much of the workers' sandbox to insist on (confine.go): best-effort (the
	// default), require (no verdict rather than one judged without the whole sandbox) or off.
	Sandbox sandbox.Mode
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
	spares  map[string][]*spare
	// spareDepths is, per worker key, how many spares it keeps once one was taken before it was
	// ready (spare.go); spareCap, when set (tests), replaces hostSpareLimit. Both are read
	// and written under mu.
	spareDepths map[string]int
	spareCap    int
	// memInfo reads /proc/meminfo's fields (footprint.MemInfo; tests replace it).
	memInfo func(field string) (int64, error)
	// compiles remembers the sources compiled OK, by compileKey.
	compiles map[string]*compileEntry
	// ipc is, per device, whether its reference processes can map a candidate's outputs (CUDA
	// IPC), as the first reference's hello said: a property of the device, the driver and torch,
	// the same for every process started there. Once known, a candidate's hello (its CUDA start)
	// runs beside the reference's start instead of after it.
	ipc map[string]bool
	// probes are, by task hash and device, what the task's reference did under the probed
	// distributions (probe.go): found once, by the first evaluation.
	probes map[string][]sdk.ProbedDistribution
	// dumps are, by task hash and device, the bytes of one trial's inputs and output, which the
	// work folder must hold where they travel as files (workroom.go); 0: not known.
	dumps map[string]int64
	// workerMu serialises checking (and rewriting) the extracted worker.
	workerMu sync.Mutex
	// sandboxNotice says once what the sandbox lacks on this host.
	sandboxNotice sync.Once
	// allocNotice says once that the workers' allocator options differ from the environment's.
	allocNotice sync.Once
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

// takeDevice waits for the device's slot, and for a GPU its host-wide evaluation lock (gpulock):
// another process's evaluation on the same GPU (a second kbplatform command, a cluster worker)
// would time its kernels into this one's numbers. The returned func gives both back. It fails
// when ctx ends first, or when the GPU's lock file cannot be opened (a temporary folder this
// process cannot write).
func (e *Evaluator) takeDevice(ctx context.Context, device string) (func(), error) {
	slot := e.deviceSlot(device)
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	held, err := gpulock.Lock(ctx, gpulock.Eval, device, func(b *gpulock.Busy) {
		e.progress("%s: waiting for GPU %s, where another process is evaluating (%s): a timing shares its GPU with nothing", device, b.GPU, b.Holder)
	})
	if err != nil {
		<-slot
		return nil, err
	}
	return func() {
		held.Release()
		<-slot
	}, nil
}

// New prepares an Evaluator: extracts the worker and creates the scratch folders.
func New(opt Options) (*Evaluator, error) {
	if opt.Python == nil {
		return nil, fmt.Errorf("%w: no python interpreter", ErrHarness)
	}
	if err := opt.Config.Validate(); err != nil {
		return nil, err
	}
	// The tasks folder exists before any worker starts: a sandbox grants only folders that exist
	// when it is made, and a spare process starts before the first task is written.
	for _, d := range []string{opt.WorkDir, filepath.Join(opt.WorkDir, "tasks"), opt.CacheDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrHarness, err)
		}
	}
	if opt.Progress == nil {
		opt.Progress = func(string) {}
	}
	if n := sweepWorkDir(opt.WorkDir); n > 0 {
		opt.Progress(fmt.Sprintf("removed %d work folder(s) of kbplatform processes that no longer run from %s", n, opt.WorkDir))
	}
	script, err := worker.Extract(filepath.Join(opt.CacheDir, "worker"))
	if errors.Is(err, worker.ErrReplaced) {
		opt.Progress("warning: " + err.Error())
	} else if err != nil {
		return nil, fmt.Errorf("%w: extract worker: %v", ErrHarness, err)
	}
	if opt.HostInfo == nil {
		opt.HostInfo = DefaultHostInfo
	}
	if opt.GPUProcesses == nil {
		opt.GPUProcesses = ListGPUProcesses
	}
	return &Evaluator{opt: opt, script: script, shared: &shared{refs: map[string]*refServer{}, devices: map[string]chan struct{}{}, spares: map[string][]*spare{}, spareDepths: map[string]int{}, memInfo: footprint.MemInfo, compiles: map[string]*compileEntry{}, ipc: map[string]bool{}, probes: map[string][]sdk.ProbedDistribution{}, dumps: map[string]int64{}}}, nil
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

// Close ends every reference process and spare candidate process.
func (e *Evaluator) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, r := range e.refs {
		r.p.close()
		os.RemoveAll(r.dir)
		delete(e.refs, k)
	}
	for k, ss := range e.spares {
		for _, s := range ss {
			go s.discard()
		}
		delete(e.spares, k)
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
		// cuda:N counts within the caller's CUDA_VISIBLE_DEVICES (cudadev): the worker is given
		// that GPU alone, so the lock, the fingerprint and the process list all mean its GPU.
		id, ok := cudadev.HostID(device)
		if !ok {
			return "", nil, fmt.Errorf("%w: bad device %q", ErrHarness, device)
		}
		// CUDA numbers GPUs fastest first unless told otherwise, NVML and nvidia-smi by PCI bus: on
		// a host of mixed GPUs cuda:1 of one could be index 0 of the other, and the record would
		// carry another GPU's fingerprint. PCI order makes an index NVML's index.
		return "cuda:0", []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=" + id}, nil
	}
	return "", nil, fmt.Errorf("%w: unknown device %q (want cpu or cuda:N)", ErrHarness, device)
}

// workerSetup is how a worker of a role is started on a device: its environment and the settings
// its hello sends.
func (e *Evaluator) workerSetup(role, device string) (env []string, settings workerSettings, err error) {
	wdev, env, err := deviceEnv(device)
	if err != nil {
		return nil, settings, err
	}
	if wdev == "cpu" && e.opt.Config.CPUThreads > 0 {
		env = append(env, "OMP_NUM_THREADS="+strconv.Itoa(e.opt.Config.CPUThreads))
	}
	// A backend's build recipe applies to candidates (and their compiles) only.
	recipe := e.opt.Recipe
	if role != "candidate" {
		recipe = nil
	}
	var recipeEnv map[string]string
	if recipe != nil {
		recipeEnv = recipe.Env
		keys := make([]string, 0, len(recipeEnv))
		for k := range recipeEnv {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			env = append(env, k+"="+recipeEnv[k])
		}
	}
	if wdev != "cpu" {
		alloc, changed := allocatorEnv(workerLookup(recipeEnv))
		env = append(env, alloc...)
		if len(changed) > 0 {
			e.allocNotice.Do(func() {
				e.progress("the contract's workers run PyTorch's caching allocator in cudaMalloc segments (outputs travel by CUDA IPC): %s", strings.Join(changed, "; "))
			})
		}
	}
	settings = workerSettings{
		Device:     wdev,
		Poison:     e.opt.Config.Poison,
		FlushCache: e.opt.Config.FlushCache,
	}
	if wdev == "cpu" {
		settings.CPUThreads = e.opt.Config.CPUThreads
	}
	settings.CUDAArch = e.opt.Python.Capability
	if r := recipe; r != nil {
		settings.Recipe = &buildFlags{CFlags: r.CFlags, CUDAFlags: r.CUDAFlags, IncludePaths: r.IncludePaths, LDFlags: r.LDFlags}
	}
	return env, settings, nil
}

// spawn starts a worker of role on device in dir, in the sandbox (confine.go). build is the kernel
// build folder a compile writes; other workers build, and find staged builds, in dir/ext.
func (e *Evaluator) spawn(role, device, dir, build string) (*proc, workerSettings, error) {
	env, settings, err := e.workerSetup(role, device)
	if err != nil {
		return nil, settings, err
	}
	settings.ExtCache = filepath.Join(dir, "ext")
	if build != "" {
		settings.ExtCache = filepath.Join(build, "ext")
	}
	for _, d := range []string{filepath.Join(dir, "tmp"), settings.ExtCache} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, settings, fmt.Errorf("%w: %v", ErrHarness, e.noRoom(err))
		}
	}
	if err := e.verifyWorker(); err != nil {
		return nil, settings, err
	}
	p, err := spawn(spawnSpec{Python: e.opt.Python.Path, Script: e.script, Role: role, Dir: dir, Policy: e.workerPolicy(role, device, dir, build, env), LogCap: e.opt.Config.LogLimit})
	if err != nil {
		return nil, settings, fmt.Errorf("%w: %v", ErrHarness, err)
	}
	return p, settings, nil
}

// hello starts a worker's session. No candidate code has run in the process yet (the kernel is
// imported by load), so a reply that cannot be read is the harness's own failure.
func (e *Evaluator) hello(ctx context.Context, p *proc, settings workerSettings) (helloReply, error) {
	h, err := call(ctx, p, e.opt.Config.CallTimeout+time.Minute, helloRequest{Settings: settings})
	var pe *procError
	if errors.As(err, &pe) && pe.malformed {
		return h, &procError{Class: ClassHarness, Message: pe.Message}
	}
	if err != nil {
		return h, err
	}
	if h.Fingerprint == nil {
		return h, &procError{Class: ClassHarness, Message: "hello without fingerprint"}
	}
	p.workerPID = h.PID // only to find the worker in the kernel's log should it be killed
	return h, nil
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
