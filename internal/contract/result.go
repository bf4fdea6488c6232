package contract

import "github.com/kbplatform/kbplatform/sdk"

// Version names the contract's semantics. It is part of every evaluation's key: change it when a
// change to the harness could change a verdict or a timing.
const Version = "kbp-contract/13"

// The contract's types live in the public SDK, so that third-party targets produce the same records.
type (
	Task          = sdk.Task
	Tolerance     = sdk.Tolerance
	Kernel        = sdk.Kernel
	Trial         = sdk.Trial
	Mismatch      = sdk.Mismatch
	Timing        = sdk.Timing
	Result        = sdk.Result
	CompileResult = sdk.CompileResult
	Fingerprint   = sdk.Fingerprint
	Config        = sdk.Config
	Stats         = sdk.Stats
	Validation    = sdk.Validation
	Phases        = sdk.Phases
	MemoryUse     = sdk.MemoryUse
	WorkerOp      = sdk.WorkerOp
	Profile       = sdk.Profile
	KernelTime    = sdk.KernelTime
	Flag          = sdk.Flag
	Sandbox       = sdk.Sandbox
)

// Error classes and verdicts (docs/contract.md).
const (
	ClassCompile       = sdk.ClassCompile
	ClassLoad          = sdk.ClassLoad
	ClassRuntime       = sdk.ClassRuntime
	ClassIllegalMemory = sdk.ClassIllegalMemory
	ClassTimeout       = sdk.ClassTimeout
	ClassCrash         = sdk.ClassCrash
	ClassMismatch      = sdk.ClassMismatch
	ClassInputMutated  = sdk.ClassInputMutated
	ClassTampering     = sdk.ClassTampering
	ClassNondeterm     = sdk.ClassNondeterm
	ClassReference     = sdk.ClassReference
	ClassHarness       = sdk.ClassHarness
	ClassInterrupted   = sdk.ClassInterrupted
	ClassResource      = sdk.ClassResource
	Pass               = sdk.Pass
	Fail               = sdk.Fail
	VerdictError       = sdk.VerdictError
)

// Defaults returns the contract's default configuration.
func Defaults() Config { return sdk.DefaultConfig() }

// Summarize computes timing statistics.
func Summarize(samples []float64) Stats { return sdk.Summarize(samples) }
