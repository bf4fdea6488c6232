package contract

import (
	"encoding/json"
	"fmt"
)

// The driver-worker protocol. The driver sends a worker one command at a time, a JSON object on
// one line: the envelope (op, seq) and the op's request fields. The worker answers with one JSON
// line: the reply status (seq, ok, error, tampered) and the op's reply fields. Each op has a
// request type and a reply type here; the Python worker lists the same ops and fields in
// kbpworker/protocol.py, which checks every command on receipt, and TestProtocolMatchesWorker
// holds the two lists together.
//
// Two roles answer: the reference, a clean process (the task's Model, its timing, the trusted
// comparison), and the candidate, which runs untrusted code from its load on. A candidate's
// reply is never taken on trust: call rejects a line that is not its reply, and one whose fields
// do not fit their types, as tampering; call sites check the rest (the tamper guard's findings,
// device times, that output manifests lie in the dump folder, which the reference then reads).
//
// A field is left out of a command (omitempty) only where the worker's default for a missing
// field is that field's zero value, so leaving out a zero says the same thing as sending it.

// command is what a proc sends: op names it on the wire.
type command interface {
	op() string
}

// request is a command with a reply: reply ties it to its reply type (call decodes the reply
// into an R); reply is never called.
type request[R any] interface {
	command
	reply(R)
}

// envelope is what every command carries besides its request fields: the op, and the number
// that its reply must echo.
type envelope struct {
	Op  string `json:"op"`
	Seq int    `json:"seq"`
}

// frame renders a command line: the envelope and the command's own fields in one JSON object
// (a request type holds its op's fields only; the envelope is the proc's to number).
func frame(cmd command, seq int) ([]byte, error) {
	op := cmd.op()
	head, err := json.Marshal(envelope{Op: op, Seq: seq})
	if err != nil {
		return nil, err
	}
	fields, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	if len(fields) < 2 || fields[0] != '{' {
		return nil, fmt.Errorf("the %q request is not a JSON object", op)
	}
	line := head[:len(head)-1] // without its closing brace
	if len(fields) > 2 {
		line = append(line, ',')
	}
	line = append(line, fields[1:]...)
	return append(line, '\n'), nil
}

// replyStatus is what any reply may carry. call checks seq and ok before the reply is decoded
// (a line without them is not a reply) and reads error; Error stays raw here because an error
// object that cannot be read is the worker's harness error, not a broken reply (call).
type replyStatus struct {
	Seq   int             `json:"seq"`
	OK    bool            `json:"ok"`
	Error json.RawMessage `json:"error,omitempty"`
	// Tampered is what the candidate's tamper guard found replaced (candidate replies only).
	Tampered []string `json:"tampered,omitempty"`
}

// ---- hello: either role, first. Applies the settings and starts the worker's session; the
// reply identifies the worker.

type helloRequest struct {
	Settings workerSettings `json:"settings"`
}

// workerSettings is how a worker runs, as hello sends it.
type workerSettings struct {
	Device     string `json:"device"`
	Poison     bool   `json:"poison"`      // fill let-go outputs with NaN bytes (harness.py)
	FlushCache bool   `json:"flush_cache"` // flush the cache before each timed call
	ExtCache   string `json:"ext_cache"`
	CPUThreads int    `json:"cpu_threads,omitempty"` // on the CPU; 0: torch's default
	CUDAArch   string `json:"cuda_arch,omitempty"`
	// Recipe is a backend's flags for every extension build (candidate only).
	Recipe *buildFlags `json:"recipe,omitempty"`
	// IPC: the reference can map the candidate's GPU outputs; a candidate told so exports them in
	// place (set per evaluation, once the reference's hello has answered).
	IPC bool `json:"ipc,omitempty"`
}

// buildFlags is the part of a backend's build recipe that the worker adds to every build.
type buildFlags struct {
	CFlags       []string `json:"cflags"`
	CUDAFlags    []string `json:"cuda_cflags"`
	IncludePaths []string `json:"include_paths"`
	LDFlags      []string `json:"ldflags"`
}

type helloReply struct {
	replyStatus
	Protocol int `json:"protocol"`
	PID      int `json:"pid"`
	// IPC: the worker can map other processes' GPU memory and bounds-check it (a reference that
	// can receives the candidate's outputs in place).
	IPC         bool        `json:"ipc"`
	Fingerprint Fingerprint `json:"fingerprint"`
}

func (helloRequest) op() string       { return "hello" }
func (helloRequest) reply(helloReply) {}

// ---- prepare: a spare candidate process. Imports what every evaluation imports and touches no
// device (spare.go).

type prepareRequest struct{}

type prepareReply struct{ replyStatus }

func (prepareRequest) op() string         { return "prepare" }
func (prepareRequest) reply(prepareReply) {}

// ---- load: either role. Loads the task (and, for the candidate, imports its kernel file) and
// builds the model from InitSeed; with Build false it only imports (the compile step).

type loadRequest struct {
	TaskPath   string `json:"task_path"`
	KernelPath string `json:"kernel_path,omitempty"` // candidate only
	// Build is false for an import alone; nil builds (the worker's default).
	Build    *bool  `json:"build,omitempty"`
	InitSeed int    `json:"init_seed,omitempty"`
	Mode     string `json:"mode,omitempty"` // eager (the default) or a torch.compile mode
}

type loadReply struct {
	replyStatus
	// ModelCompileS is a compile mode's first call, made during the load (nil in eager mode).
	ModelCompileS *float64 `json:"model_compile_s,omitempty"`
	// Footprint is the task's eager footprint, measured by the reference on a GPU.
	Footprint int64        `json:"footprint,omitempty"`
	Memory    workerMemory `json:"memory"`
	ExtBuilds int          `json:"ext_builds"`
	ExtHits   int          `json:"ext_hits"`
}

func (loadRequest) op() string      { return "load" }
func (loadRequest) reply(loadReply) {}

// ---- trial: candidate. One correctness call on inputs made from (Seed, Dist); its output, and
// with InputsDump its inputs after the call, are exported for the reference to compare.

type trialRequest struct {
	Seed       int    `json:"seed"`
	Dist       string `json:"dist"`
	Dump       string `json:"dump"`
	InputsDump string `json:"inputs_dump,omitempty"`
}

type trialReply struct {
	replyStatus
	// Output and Inputs are manifests of exported tensors: passed on to the reference, which
	// validates them, after the driver has checked their paths (manifestInside).
	Output  json.RawMessage `json:"output"`
	Inputs  json.RawMessage `json:"inputs,omitempty"`
	Mutated []int           `json:"mutated"` // inputs whose digest the call changed
	CallMS  float64         `json:"call_ms"`
	// Unordered are the outputs (flattened leaves) whose content changed after the device-wide
	// synchronisation that follows forward, compared with what the caller's stream read right
	// after forward returned (on a GPU).
	Unordered []int `json:"unordered,omitempty"`
}

func (trialRequest) op() string       { return "trial" }
func (trialRequest) reply(trialReply) {}

// ---- timed: either role. One timed call (or, with Noop, an empty one), bracketed by marks on
// the clock channel.

type timedRequest struct {
	Seed int    `json:"seed"`
	Dist string `json:"dist"`
	Noop bool   `json:"noop"`
}

type timedReply struct {
	replyStatus
	// DeviceMS is the call's device time; nil when the reply has none (invalid, timing.go).
	DeviceMS *float64 `json:"device_ms"`
	HostMS   float64  `json:"host_ms"`
	// ThreadsStarted counts threads the call started and left running.
	ThreadsStarted int `json:"threads_started,omitempty"`
}

func (timedRequest) op() string       { return "timed" }
func (timedRequest) reply(timedReply) {}

// ---- profile: candidate. One more correctness call under the profiler, never timed: the
// runtime evidence (profile.go).

type profileRequest struct {
	Seed int    `json:"seed"`
	Dist string `json:"dist"`
	Dump string `json:"dump"`
}

type profileReply struct {
	replyStatus
	Output json.RawMessage `json:"output"`
	// Profile is the evidence (workerEvidence), decoded where it is used: evidence that cannot
	// be read is a warning, never a verdict.
	Profile json.RawMessage `json:"profile"`
}

func (profileRequest) op() string         { return "profile" }
func (profileRequest) reply(profileReply) {}

// ---- dump_last: candidate. Exports the last timed call's output and inputs for a re-check, and
// says whether the output changed after the call returned.

type dumpLastRequest struct {
	Dump       string `json:"dump"`
	InputsDump string `json:"inputs_dump,omitempty"`
}

type dumpLastReply struct {
	replyStatus
	Output     json.RawMessage `json:"output"`
	Inputs     json.RawMessage `json:"inputs,omitempty"`
	LateWrites bool            `json:"late_writes"`
}

func (dumpLastRequest) op() string          { return "dump_last" }
func (dumpLastRequest) reply(dumpLastReply) {}

// ---- memory: either role. The allocator's peak device memory since the last load.

type memoryRequest struct{}

type memoryReply struct {
	replyStatus
	Memory workerMemory `json:"memory"`
}

func (memoryRequest) op() string        { return "memory" }
func (memoryRequest) reply(memoryReply) {}

// ---- guard: candidate. Runs the tamper guard now (its findings are the status's Tampered).

type guardRequest struct{}

type guardReply struct{ replyStatus }

func (guardRequest) op() string       { return "guard" }
func (guardRequest) reply(guardReply) {}

// ---- compare: reference. Compares a candidate's exported output (and inputs) with its own for
// (Seed, Dist); with Digest the reply hashes what it read, with Precision it measures a correct
// output's precision against a float64 run.

type compareRequest struct {
	Seed      int             `json:"seed"`
	Dist      string          `json:"dist"`
	Output    json.RawMessage `json:"output"`
	Strides   string          `json:"strides"`
	Tolerance *Tolerance      `json:"tolerance,omitempty"`
	Inputs    json.RawMessage `json:"inputs,omitempty"`
	Digest    bool            `json:"digest,omitempty"`
	Precision bool            `json:"precision,omitempty"`
}

type compareReply struct {
	replyStatus
	Result struct {
		OK      bool             `json:"ok"`
		Kind    string           `json:"kind"`
		Message string           `json:"message"`
		Leaves  []map[string]any `json:"leaves"`
	} `json:"result"`
	// Digest is a content hash of each output leaf the reference read: two calls on one input
	// that return equal digests returned the same bytes.
	Digest        json.RawMessage `json:"digest,omitempty"`
	InputsChanged []int           `json:"inputs_changed,omitempty"`
	RefCallMS     float64         `json:"ref_call_ms"`
	// Precision is the measured precision of a correct output, when asked (measuredPrecision,
	// decoded where it is used: a measurement that cannot be read is lost evidence, no more).
	Precision json.RawMessage `json:"precision,omitempty"`
}

func (compareRequest) op() string         { return "compare" }
func (compareRequest) reply(compareReply) {}

// ---- sensitivity: reference. Whether one fixed output would pass a comparison with the reference
// outputs of all of an evaluation's trials, and when one would, the first other distribution whose
// output for Seed every such constant fails (sensitivity.go).

type sensitivityRequest struct {
	Trials    []trialKey `json:"trials"`
	Seed      int        `json:"seed"`
	Tolerance *Tolerance `json:"tolerance,omitempty"`
}

// trialKey names one trial's input: the reference recomputes it from the seed.
type trialKey struct {
	Seed int    `json:"seed"`
	Dist string `json:"dist"`
}

type sensitivityReply struct {
	replyStatus
	sensitivityReport
}

// sensitivityReport is what the reference found; validate reports it too.
type sensitivityReport struct {
	// Varies: no fixed output is within the tolerance of all the trials' reference outputs, so
	// the trials tell a constant output from a computed one.
	Varies bool `json:"varies"`
	// Dist is the distribution whose output every constant passing the trials fails ("" when
	// Varies, or when no distribution tried gave one).
	Dist string `json:"dist"`
	// Probed says what each distribution tried gave.
	Probed []probedDist `json:"probed"`
	// RefCallMS is the time of the reference calls the probes made.
	RefCallMS float64 `json:"ref_call_ms"`
}

type probedDist struct {
	Dist    string `json:"dist"`
	Finite  bool   `json:"finite"`
	Differs bool   `json:"differs"`
	// Error is what the reference raised under the distribution (which is then skipped).
	Error string `json:"error,omitempty"`
}

func (sensitivityRequest) op() string             { return "sensitivity" }
func (sensitivityRequest) reply(sensitivityReply) {}

// ---- probe: reference. Which distributions keep the reference finite and change its output
// (probe.go).

type probeRequest struct {
	Distributions []string   `json:"distributions"`
	Seed          int        `json:"seed"`
	Tolerance     *Tolerance `json:"tolerance,omitempty"`
}

type probeReply struct {
	replyStatus
	Probes    []probeEntry `json:"probes"`
	RefCallMS float64      `json:"ref_call_ms"`
}

// probeEntry is what the reference did under one distribution.
type probeEntry struct {
	Dist    string `json:"dist"`
	Error   string `json:"error,omitempty"`   // the reference raised
	Finite  bool   `json:"finite,omitempty"`  // every floating output value was finite
	Changes bool   `json:"changes,omitempty"` // the output differs from the one on the task's own inputs
}

func (probeRequest) op() string       { return "probe" }
func (probeRequest) reply(probeReply) {}

// ---- inputs_repeat: reference. Makes the task's inputs for (Seed, Dist) twice and says which
// positions differ: a task whose get_inputs is not a function of the seed the harness set
// (taskblame.go).

type inputsRepeatRequest struct {
	Seed int    `json:"seed"`
	Dist string `json:"dist"`
}

type inputsRepeatReply struct {
	replyStatus
	Differ []int `json:"differ"`
}

func (inputsRepeatRequest) op() string              { return "inputs_repeat" }
func (inputsRepeatRequest) reply(inputsRepeatReply) {}

// ---- io_bytes: reference. The bytes of the task's inputs and of its output for (Seed, Dist):
// what a trial's dumps hold where tensors travel as files (workroom.go).

type ioBytesRequest struct {
	Seed int    `json:"seed"`
	Dist string `json:"dist"`
}

type ioBytesReply struct {
	replyStatus
	InputsBytes int64 `json:"inputs_bytes"`
	OutputBytes int64 `json:"output_bytes"`
}

func (ioBytesRequest) op() string         { return "io_bytes" }
func (ioBytesRequest) reply(ioBytesReply) {}

// ---- validate: reference. Runs the task's reference on every distribution and reports whether
// it is usable (validate.go).

type validateRequest struct {
	Distributions []string   `json:"distributions"`
	Seeds         []int      `json:"seeds"`
	Tolerance     *Tolerance `json:"tolerance,omitempty"`
}

type validateReply struct {
	replyStatus
	validateReport
}

// validateReport is the reference's report, kept whole in Validation.Report.
type validateReport struct {
	Distributions []validatedDist `json:"distributions"`
	Warnings      []string        `json:"warnings"`
	// Sensitivity is the sensitivity op's answer for every distribution and seed validated (nil
	// from a worker that did not say).
	Sensitivity *sensitivityReport `json:"sensitivity,omitempty"`
}

type validatedDist struct {
	Dist      string `json:"dist"`
	Nonfinite int    `json:"nonfinite,omitempty"`
	// InputsDiffer: the positions of the inputs that two calls of get_inputs under one seed made
	// differently (then nothing else of the distribution was tried).
	InputsDiffer []int `json:"inputs_differ,omitempty"`
	// Deterministic: two calls on one input agree within the task's tolerance; Bitwise: to the
	// bit (nil from a worker that did not say), and RepeatDiff is how far apart they were.
	Deterministic bool     `json:"deterministic"`
	Bitwise       *bool    `json:"bitwise,omitempty"`
	RepeatDiff    *float64 `json:"repeat_max_abs_diff,omitempty"`
	// Output describes the outputs' dtypes and shapes (or values), on the first distribution.
	Output []map[string]any `json:"output,omitempty"`
}

func (validateRequest) op() string          { return "validate" }
func (validateRequest) reply(validateReply) {}

// ---- gc: either role. Collects garbage and gives cached device memory back (the driver has no
// use for it today; the worker serves it).

type gcRequest struct{}

type gcReply struct{ replyStatus }

func (gcRequest) op() string    { return "gc" }
func (gcRequest) reply(gcReply) {}

// ---- exit: either role. The worker replies, then ends its process (proc.close).

type exitRequest struct{}

type exitReply struct{ replyStatus }

func (exitRequest) op() string      { return "exit" }
func (exitRequest) reply(exitReply) {}
