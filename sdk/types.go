package sdk

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Error classes of the contract (docs/contract.md describes each).
const (
	ClassCompile       = "compile_error"
	ClassLoad          = "load_error"
	ClassRuntime       = "runtime_error"
	ClassIllegalMemory = "illegal_memory_access"
	ClassTimeout       = "timeout"
	ClassCrash         = "crash"
	ClassMismatch      = "output_mismatch"
	ClassInputMutated  = "input_mutated"
	ClassTampering     = "tampering"
	ClassNondeterm     = "nondeterministic"
	// ClassStreamUnordered: the output was not complete when the caller's CUDA stream reached
	// the end of forward (the work ran on a stream the caller's stream does not wait for).
	ClassStreamUnordered = "stream_unordered"
	ClassReference       = "reference_error"
	ClassHarness         = "harness_error"
	ClassInterrupted     = "interrupted"
	// ClassRejected is set by the host, not the contract: a backend's static check rejected the
	// candidate before it was built (the message says which rule and why).
	ClassRejected = "rejected"
	// ClassResource (verdict error): the task does not fit the device next to the harness, or
	// the reference ran out of device memory. Decided before any candidate code runs.
	ClassResource = "resource"
)

// Classes of failures that are not the kernel's, set by the host when it records an evaluation
// (verdict error): the task's own code failed, the platform (device, target plugin, harness)
// failed, or the environment lacks what the kernel's language needs (docs/contract.md, Blame).
const (
	ClassTask        = "task_error"
	ClassPlatform    = "platform_error"
	ClassEnvironment = "environment_error"
)

// PhaseTask is the phase of a reference_error the contract confirmed in its clean reference
// process is the task's own code's: a task file that does not load, a get_inputs that is not a
// function of its seed, or one that dies (killed for memory, say) where the candidate's process
// died. The host stores it as task_error whatever its message says.
const PhaseTask = "task"

// Verdicts. VerdictError means the harness or the task failed: no verdict about the kernel.
const (
	Pass         = "pass"
	Fail         = "fail"
	VerdictError = "error"
)

// Task is what the contract needs to know about a task.
type Task struct {
	ID            string        `json:"id"`
	Hash          string        `json:"hash"` // sha256 of Source
	Size          string        `json:"size"` // which size Source was rendered at
	Source        string        `json:"-"`    // the rendered task file
	Distributions []string      `json:"distributions"`
	Tolerance     *Tolerance    `json:"tolerance,omitempty"`
	Strides       string        `json:"strides,omitempty"`
	Timeout       time.Duration `json:"timeout,omitempty"`
	Name          string        `json:"name,omitempty"`
	Level         int           `json:"level,omitempty"`
}

// Tolerance overrides the dtype-aware default.
type Tolerance struct {
	Atol float64 `json:"atol"`
	Rtol float64 `json:"rtol"`
}

// Kernel is a candidate file.
type Kernel struct {
	Hash   string `json:"hash"` // sha256 of Source
	Source string `json:"-"`
	Name   string `json:"name"` // where it came from (a path), for messages
}

// Trial is one correctness trial.
type Trial struct {
	Seed         int    `json:"seed"`
	Dist         string `json:"dist"`
	OK           bool   `json:"ok"`
	Kind         string `json:"kind,omitempty"`
	Message      string `json:"message,omitempty"`
	Repeated     bool   `json:"repeated,omitempty"`
	Consistent   *bool  `json:"consistent,omitempty"`
	InputChanged []int  `json:"input_changed,omitempty"`
	// Added says why the contract added this trial to the task's own (a distribution that
	// changes an output the task's distributions barely change); empty for the task's trials.
	Added string `json:"added,omitempty"`
}

// Mismatch says how wrong an output was: the first failing comparison, in detail.
type Mismatch struct {
	Phase   string         `json:"phase"` // "correctness" or "timing"
	Seed    int            `json:"seed"`
	Dist    string         `json:"dist"`
	Call    int            `json:"call,omitempty"` // timed call index, for phase timing
	Kind    string         `json:"kind"`           // structure, dtype, shape, strides, device, values
	Message string         `json:"message"`
	Detail  map[string]any `json:"detail,omitempty"`
}

// Timing holds the raw summaries of both sides and the speedup.
type Timing struct {
	Candidate     Stats     `json:"candidate"`
	Reference     Stats     `json:"reference"`
	CandidateWall Stats     `json:"candidate_wall"`
	ReferenceWall Stats     `json:"reference_wall"`
	Overhead      Stats     `json:"overhead"` // driver-measured wall time of empty timed calls
	Speedup       float64   `json:"speedup"`  // reference median / candidate median
	Checked       int       `json:"checked"`  // timed outputs re-checked against the reference
	Samples       []float64 `json:"samples_ms,omitempty"`
	RefSamples    []float64 `json:"reference_samples_ms,omitempty"`
	Warmup        int       `json:"warmup"`
	// SpeedupLow and SpeedupHigh bound, with 95% confidence, the median of the per-call speedups
	// (reference call i / candidate call i, timed next to each other); zero with fewer than 6
	// timed calls. SpeedupHalves is that median over the first and over the second half of the
	// timed calls (from 10 calls). Both say whether Speedup is resolved (FlagTimingUnresolved).
	SpeedupLow    float64   `json:"speedup_low,omitempty"`
	SpeedupHigh   float64   `json:"speedup_high,omitempty"`
	SpeedupHalves []float64 `json:"speedup_halves,omitempty"`
}

// Result is the outcome of one evaluation.
type Result struct {
	Contract    string         `json:"contract"`
	Task        Task           `json:"task"`
	Kernel      Kernel         `json:"kernel"`
	Device      string         `json:"device"`
	Verdict     string         `json:"verdict"`
	ErrorClass  string         `json:"error_class,omitempty"`
	Phase       string         `json:"phase,omitempty"`
	Message     string         `json:"message,omitempty"`
	Traceback   string         `json:"traceback,omitempty"`
	Log         string         `json:"log,omitempty"`
	Tampered    []string       `json:"tampered,omitempty"`
	Trials      []Trial        `json:"trials,omitempty"`
	Mismatch    *Mismatch      `json:"mismatch,omitempty"`
	Timing      *Timing        `json:"timing,omitempty"`
	Warnings    []string       `json:"warnings,omitempty"`
	Fingerprint Fingerprint    `json:"fingerprint"`
	Config      Config         `json:"config"`
	Compile     *CompileResult `json:"compile,omitempty"`
	// ModelCompileS is, for a baseline in a torch.compile mode, the seconds its first call took
	// (tracing, code generation, autotuning): spent before any trial, never timed.
	ModelCompileS float64 `json:"model_compile_s,omitempty"`
	// Flags are remarks that never change the verdict (see Flag).
	Flags []Flag `json:"flags,omitempty"`
	// Phases says where the evaluation's wall time went; Memory what it held on the device.
	Phases *Phases    `json:"phases,omitempty"`
	Memory *MemoryUse `json:"memory,omitempty"`
	// Profile is the profiler's per-kernel breakdown of one forward of a correct candidate (the
	// P of refinement feedback); nil when the target does not profile or the kernel failed.
	Profile *Profile `json:"profile,omitempty"`
	// Sandbox says what confined the processes that ran the candidate's code; nil on records
	// made before the sandbox existed.
	Sandbox    *Sandbox  `json:"sandbox,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// Sandbox is what confined an evaluation's candidate processes (docs/contract.md, "Sandbox").
type Sandbox struct {
	// Landlock is the Landlock ABI in force; 0: the filesystem was not confined.
	Landlock int `json:"landlock_abi"`
	// Network is "denied", "denied (tcp only)" or "open".
	Network string `json:"network"`
	// Seccomp is whether the system-call filter was installed.
	Seccomp bool `json:"seccomp"`
	// Env is how the environment was built ("allowlist": no keys, tokens or provider variables).
	Env string `json:"env"`
	// Scoped is whether signals and abstract unix sockets outside the sandbox were out of reach.
	Scoped bool `json:"scoped,omitempty"`
	// Tasks is how the processes a kernel may start were bounded: "rlimit" (RLIMIT_NPROC),
	// "cgroup" (a pids cgroup, for root, whom RLIMIT_NPROC does not bind), or "" (unbounded).
	Tasks string `json:"tasks,omitempty"`
	// Missing lists what the host could not apply, each with why.
	Missing []string `json:"missing,omitempty"`
}

// String is the one-line summary screens show, e.g.
// "landlock abi 7, net denied, seccomp, env allowlist, signals scoped".
func (s Sandbox) String() string {
	var parts []string
	if s.Landlock > 0 {
		parts = append(parts, fmt.Sprintf("landlock abi %d", s.Landlock))
	} else {
		parts = append(parts, "no landlock")
	}
	parts = append(parts, "net "+s.Network)
	if s.Seccomp {
		parts = append(parts, "seccomp")
	} else {
		parts = append(parts, "no seccomp")
	}
	parts = append(parts, "env "+s.Env)
	if s.Scoped {
		parts = append(parts, "signals scoped")
	}
	if s.Tasks != "" {
		parts = append(parts, "tasks bounded ("+s.Tasks+")")
	}
	return strings.Join(parts, ", ")
}

// Phases says where an evaluation's wall time went, in seconds from the moment it held the device.
type Phases struct {
	WaitDevice     float64   `json:"wait_device_s"`     // waiting for the device's slot, before Total starts
	CandidateStart float64   `json:"candidate_start_s"` // when the candidate's process was ready
	ReferenceReady float64   `json:"reference_ready_s"` // when the reference process was ready
	Load           float64   `json:"load_s"`            // both model builds and the candidate's import
	Trials         []float64 `json:"trials_s"`          // each correctness trial: calls and comparisons
	Timing         float64   `json:"timing_s"`          // the timing phase, re-checks included
	Rechecks       float64   `json:"rechecks_s"`        // the re-checks of timed calls alone
	// GPUWork is the time inside the correctness and timed calls of both sides (warm-up included,
	// empty calls not): what an evaluation cannot do without.
	GPUWork float64 `json:"gpu_work_s"`
	Total   float64 `json:"total_s"`
	// ReferenceOps and CandidateOps split each process's time by worker operation (load, trial,
	// compare, timed, ...), as the process itself measured it. The difference between Total and
	// their sum is the driver's own time: process starts, pipes, transfers. The candidate's are
	// diagnostic only: its process ran untrusted code and could have written anything there.
	ReferenceOps map[string]WorkerOp `json:"reference_ops,omitempty"`
	CandidateOps map[string]WorkerOp `json:"candidate_ops,omitempty"`
}

// WorkerOp is what one kind of worker operation cost a process during one evaluation.
type WorkerOp struct {
	Calls   int     `json:"calls"`
	Seconds float64 `json:"seconds"`
	// PeakBytes is the device memory the process's allocator reserved at most during these
	// operations, PeakAllocatedBytes what its live tensors used at most (zero on the CPU).
	PeakBytes          int64 `json:"peak_bytes"`
	PeakAllocatedBytes int64 `json:"peak_allocated_bytes,omitempty"`
}

// Profile is one profiled forward of a candidate: what ran, most expensive first.
type Profile struct {
	Tool    string       `json:"tool"`     // the profiler, e.g. "torch.profiler"
	TotalUS float64      `json:"total_us"` // device (or CPU) time of all kernels of the forward
	Kernels []KernelTime `json:"kernels"`
}

// KernelTime is one kernel of a profiled forward.
type KernelTime struct {
	Name    string  `json:"name"`
	Calls   int64   `json:"calls"`
	TotalUS float64 `json:"total_us"`
	Share   float64 `json:"share"` // of Profile.TotalUS, 0..1
	// Custom is true for a kernel the candidate built itself (not one of PyTorch's own).
	Custom bool `json:"custom"`
}

// MemoryUse is an evaluation's device memory, as its processes' allocators saw it (CUDA contexts
// not included). Zero on the CPU.
type MemoryUse struct {
	// Footprint is the peak of one eager forward of the task: weights, inputs, outputs and the
	// forward's own temporaries.
	Footprint     int64 `json:"footprint_bytes"`
	ReferencePeak int64 `json:"reference_peak_bytes"`
	CandidatePeak int64 `json:"candidate_peak_bytes"`
	// Peak is the sum of both processes' peaks: an upper bound of what they held together.
	Peak        int64 `json:"peak_bytes"`
	DeviceTotal int64 `json:"device_total_bytes"`
	// EvidencePeak is what the reference process held at the peak of the runtime evidence's
	// float64 precision run, made after timing only where it fits: not part of Peak, which is
	// what judging the kernel needs.
	EvidencePeak int64 `json:"evidence_peak_bytes,omitempty"`
	// ReferenceAllocated and CandidateAllocated are each process's peak of memory in live
	// tensors. Where a peak (reserved) runs well ahead of it, the allocator's cached blocks did not
	// fit a request and it took new ones.
	ReferenceAllocated int64 `json:"reference_allocated_bytes,omitempty"`
	CandidateAllocated int64 `json:"candidate_allocated_bytes,omitempty"`
	// Harness is the part of Peak that the harness holds whatever the task: each process's
	// cache-flush buffer (0.25 GiB apiece on a GPU). On a small task it is most of Peak, so
	// TaskRatio leaves it out.
	Harness int64 `json:"harness_bytes,omitempty"`
}

// Ratio is Peak over the footprint: what judging the kernel held, in eager forwards of the task.
func (m *MemoryUse) Ratio() float64 {
	if m == nil || m.Footprint <= 0 {
		return 0
	}
	return float64(m.Peak) / float64(m.Footprint)
}

// TaskRatio is Ratio without the harness's fixed buffers: the part of the peak that grows with
// the task.
func (m *MemoryUse) TaskRatio() float64 {
	if m == nil || m.Footprint <= 0 {
		return 0
	}
	return float64(m.Peak-m.Harness) / float64(m.Footprint)
}

// CompileResult is the outcome of the compile phase (importing the candidate on the CPU side).
type CompileResult struct {
	OK         bool          `json:"ok"`
	ErrorClass string        `json:"error_class,omitempty"`
	Message    string        `json:"message,omitempty"`
	Traceback  string        `json:"traceback,omitempty"`
	Log        string        `json:"log,omitempty"`
	Builds     int           `json:"builds"`
	CacheHits  int           `json:"cache_hits"`
	Duration   time.Duration `json:"duration_ns"`
}

// Fingerprint describes the hardware and software an evaluation ran on.
type Fingerprint map[string]any

// stableKeys are the fingerprint fields that identify a platform; clocks and temperatures are
// recorded but do not make a new platform.
var stableKeys = []string{"device_name", "gpu_name", "compute_capability", "driver", "torch", "torch_cuda", "cudnn", "triton", "python", "cpu_model", "cpu_threads"}

// Key returns a short hash identifying the platform the fingerprint describes.
func (fp Fingerprint) Key() string {
	keys := append([]string(nil), stableKeys...)
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%v\n", k, fp[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Summary is a one-line description for humans.
func (fp Fingerprint) Summary() string {
	name, _ := fp["device_name"].(string)
	if g, ok := fp["gpu_name"].(string); ok && g != "" {
		name = g
	}
	if name == "" || name == "x86_64" {
		if c, ok := fp["cpu_model"].(string); ok {
			name = c
		}
	}
	parts := []string{name}
	if t, ok := fp["torch"].(string); ok {
		parts = append(parts, "torch "+t)
	}
	if d, ok := fp["driver"].(string); ok && d != "" {
		parts = append(parts, "driver "+d)
	}
	if t, ok := fp["triton"].(string); ok && t != "" {
		parts = append(parts, "triton "+t)
	}
	return strings.Join(parts, ", ")
}

// Config holds the knobs of the contract (docs/contract.md). Defaults() gives the documented defaults.
type Config struct {
	Seeds          int           `json:"seeds" mapstructure:"seeds"`
	Warmup         int           `json:"warmup" mapstructure:"warmup"`
	TimedCalls     int           `json:"timed_calls" mapstructure:"timed_calls"`
	CheckCalls     int           `json:"check_calls" mapstructure:"check_calls"`
	NoopCalls      int           `json:"noop_calls" mapstructure:"noop_calls"`
	FlushCache     bool          `json:"flush_cache" mapstructure:"flush_cache"`
	Poison         bool          `json:"poison" mapstructure:"poison"`
	CPUThreads     int           `json:"cpu_threads" mapstructure:"cpu_threads"`
	Seed           int64         `json:"seed,omitempty" mapstructure:"seed"` // 0: draw fresh seeds per evaluation
	Timeout        time.Duration `json:"timeout" mapstructure:"timeout"`
	CallTimeout    time.Duration `json:"call_timeout" mapstructure:"call_timeout"`
	CompileTimeout time.Duration `json:"compile_timeout" mapstructure:"compile_timeout"`
	LogLimit       int           `json:"log_limit" mapstructure:"log_limit"`
	KeepSamples    bool          `json:"keep_samples" mapstructure:"keep_samples"`
}

// DefaultConfig returns the contract's default configuration.
func DefaultConfig() Config {
	return Config{
		Seeds:          5,
		Warmup:         5,
		TimedCalls:     100,
		CheckCalls:     10,
		NoopCalls:      10,
		FlushCache:     true,
		Poison:         true,
		CPUThreads:     1,
		Timeout:        15 * time.Minute,
		CallTimeout:    2 * time.Minute,
		CompileTimeout: 10 * time.Minute,
		LogLimit:       64 << 10,
		KeepSamples:    true,
	}
}

// Validate rejects settings under which a verdict would not mean what it says.
func (c Config) Validate() error {
	switch {
	case c.Seeds < 1:
		return fmt.Errorf("contract: seeds must be at least 1 (got %d)", c.Seeds)
	case c.TimedCalls < 1:
		return fmt.Errorf("contract: timed_calls must be at least 1 (got %d)", c.TimedCalls)
	case c.Warmup < 0:
		return fmt.Errorf("contract: warmup must not be negative (got %d)", c.Warmup)
	case c.CheckCalls < 0 || c.CheckCalls > c.TimedCalls:
		return fmt.Errorf("contract: check_calls must be between 0 and timed_calls (got %d)", c.CheckCalls)
	case c.NoopCalls < 1:
		return fmt.Errorf("contract: noop_calls must be at least 1 (got %d)", c.NoopCalls)
	case c.Timeout <= 0 || c.CallTimeout <= 0 || c.CompileTimeout <= 0:
		return fmt.Errorf("contract: timeouts must be positive")
	}
	return nil
}

// Stats summarises timing samples in milliseconds.
type Stats struct {
	N      int     `json:"n"`
	Median float64 `json:"median_ms"`
	Mean   float64 `json:"mean_ms"`
	Min    float64 `json:"min_ms"`
	Max    float64 `json:"max_ms"`
	Q1     float64 `json:"q1_ms"`
	Q3     float64 `json:"q3_ms"`
	IQR    float64 `json:"iqr_ms"`
	Std    float64 `json:"std_ms"`
	CV     float64 `json:"cv"`
}

// Summarize computes Stats; quantiles interpolate linearly between order statistics.
func Summarize(samples []float64) Stats {
	n := len(samples)
	if n == 0 {
		return Stats{}
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	mean := sum / float64(n)
	var ss float64
	for _, v := range s {
		ss += (v - mean) * (v - mean)
	}
	std := 0.0
	if n > 1 {
		std = math.Sqrt(ss / float64(n-1))
	}
	st := Stats{
		N:      n,
		Median: quantile(s, 0.5),
		Mean:   mean,
		Min:    s[0],
		Max:    s[n-1],
		Q1:     quantile(s, 0.25),
		Q3:     quantile(s, 0.75),
		Std:    std,
	}
	st.IQR = st.Q3 - st.Q1
	if mean > 0 {
		st.CV = std / mean
	}
	return st
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	frac := pos - float64(lo)
	return sorted[lo]*(1-frac) + sorted[hi]*frac
}

// Validation is the outcome of running a task's reference on its own.
type Validation struct {
	// Probes are what the reference did under the distributions the contract probes on every
	// task; the kept ones add a trial to each evaluation.
	Probes   []ProbedDistribution `json:"probes,omitempty"`
	TaskID   string               `json:"task_id"`
	Size     string               `json:"size"`
	Device   string               `json:"device"`
	Path     string               `json:"path,omitempty"`
	OK       bool                 `json:"ok"`
	Output   string               `json:"output,omitempty"` // e.g. float32[64, 4096]
	Errors   []string             `json:"errors,omitempty"`
	Warnings []string             `json:"warnings,omitempty"`
	Report   map[string]any       `json:"report,omitempty"`
}

// ProbedDistribution is what a task's reference did under one of the distributions the contract
// probes on every task (negated, uniform, small: KernelBench's inputs are all in [0, 1), where an
// operation that differs on negative inputs is invisible). A kept one adds a trial to every
// evaluation of the task; Reason says why one was refused.
type ProbedDistribution struct {
	Dist   string `json:"dist"`
	Kept   bool   `json:"kept"`
	Reason string `json:"reason,omitempty"`
}
