package contract

import "time"

// Version names the contract's semantics. It is part of every evaluation's key: change it when a
// change to the harness could change a verdict or a timing.
const Version = "kbp-contract/1"

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
	ClassReference     = "reference_error"
	ClassHarness       = "harness_error"
	ClassInterrupted   = "interrupted"
)

// Verdicts.
const (
	Pass = "pass"
	Fail = "fail"
)

// Task is what the contract needs to know about a task.
type Task struct {
	ID            string            `json:"id"`
	Hash          string            `json:"hash"` // sha256 of Source
	Size          string            `json:"size"` // which size Source was rendered at
	Source        string            `json:"-"`    // the rendered task file
	Distributions []string          `json:"distributions"`
	Tolerance     *Tolerance        `json:"tolerance,omitempty"`
	Strides       string            `json:"strides,omitempty"`
	Timeout       time.Duration     `json:"timeout,omitempty"`
	Meta          map[string]string `json:"meta,omitempty"`
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
	StartedAt   time.Time      `json:"started_at"`
	FinishedAt  time.Time      `json:"finished_at"`
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
