package sdk

import "slices"

// Flag is a remark on a result under a stable name, with the reason it applies. A flag never
// turns a correct result into a failure; reports can leave flagged results out of fast_p
// (`--exclude-flag NAME`).
type Flag struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Flag names. Static checks raise FlagTorchDelegation; the contract's correctness trials raise
// FlagInputInsensitive; its timing raises FlagTimingUnresolved, FlagGPUShared and FlagCPUShared; its runtime
// evidence raises the others.
const (
	// FlagTorchDelegation: the candidate's forward reaches the PyTorch operators it was asked to
	// replace (directly, through aliases or helpers, or as a fallback).
	FlagTorchDelegation = "torch_delegation"
	// FlagNoCustomKernel: no kernel built from the candidate's own source ran during forward.
	FlagNoCustomKernel = "no_custom_kernel"
	// FlagPrecisionDowncast: the measured precision is below the task's dtype.
	FlagPrecisionDowncast = "precision_downcast"
	// FlagInputInsensitive: no input distribution changes the task's output beyond its tolerance,
	// so the correctness trials cannot tell a constant output from a computed one.
	FlagInputInsensitive = "input_insensitive"
	// FlagTimingUnresolved: the timed calls do not pin the speedup down. The per-call speedups'
	// 95% interval is wider than 5%, or their median moved by more than 5% between the first and
	// the second half of the timed calls: the two sides' speeds changed apart from each other,
	// which alternating the calls cannot cancel. It is a remark on the measurement, not on the kernel (MeasurementFlag).
	FlagTimingUnresolved = "timing_unresolved"
	// FlagGPUShared: a program outside kbplatform held a context on the GPU when the timed calls
	// started or ended. Its kernels, if it ran any, shared the SMs and the memory bandwidth with
	// the timed calls, which nothing in kbplatform can stop. A remark on the measurement
	// (MeasurementFlag).
	FlagGPUShared = "gpu_shared"
	// FlagCPUShared: a CPU evaluation's timed calls could not take their turn at the host's CPUs
	// (the lock that keeps two kbplatform processes' timings apart could not be taken), so
	// another kbplatform process may have timed its kernels beside them. A remark on the
	// measurement (MeasurementFlag).
	FlagCPUShared = "cpu_shared"
)

// KernelFlags are the flags that say a passing kernel is not a solution of its task: it ran no
// kernel of its own, delegated to the operators it was to replace, passed only because the
// output barely depends on the inputs, or computed below the task's precision (an output not
// ready on the caller's stream is no pass at all: ClassStreamUnordered). fast_p and @k count a pass carrying one as no
// solution, and reports show the share counting them beside it. The one list: metrics, study
// summaries and reports all read it here.
func KernelFlags() []string {
	return []string{FlagNoCustomKernel, FlagTorchDelegation, FlagInputInsensitive, FlagPrecisionDowncast}
}

// KernelFlag reports whether a flag says the kernel is not a solution (KernelFlags).
func KernelFlag(name string) bool { return slices.Contains(KernelFlags(), name) }

// Solution reports whether the result is a pass that carries no kernel flag: what fast_p counts.
func (r *Result) Solution() bool {
	return r != nil && r.Verdict == Pass && !slices.ContainsFunc(r.Flags, func(f Flag) bool { return KernelFlag(f.Name) })
}

// MeasurementFlag reports whether a flag remarks on how well a result was measured rather than
// on what the kernel does: the same kernel can get it on one run and not on the next.
func MeasurementFlag(name string) bool {
	return name == FlagTimingUnresolved || name == FlagGPUShared || name == FlagCPUShared
}

// HasFlag reports whether the result carries the named flag.
func (r *Result) HasFlag(name string) bool {
	return r != nil && slices.ContainsFunc(r.Flags, func(f Flag) bool { return f.Name == name })
}

// FlagReason is the reason of the named flag, "" when the result does not carry it.
func (r *Result) FlagReason(name string) string {
	if r != nil {
		if i := slices.IndexFunc(r.Flags, func(f Flag) bool { return f.Name == name }); i >= 0 {
			return r.Flags[i].Reason
		}
	}
	return ""
}

// AddFlag adds a flag unless one of the same name is already there (the first reason stays).
func (r *Result) AddFlag(f Flag) {
	if f.Name == "" || r.HasFlag(f.Name) {
		return
	}
	r.Flags = append(r.Flags, f)
}
