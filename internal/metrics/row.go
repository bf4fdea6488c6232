// Package metrics computes KernelBench's measures (fast_p, fast_p@k, fast_p@N by turn, geometric
// mean speedup, error-class breakdowns, bootstrap intervals) over plain rows. It knows nothing of
// the store, so the way studies record attempts can change without touching the arithmetic.
package metrics

import (
	"slices"
	"strconv"
	"strings"
)

// Eager is the reference every evaluation is timed against; other baselines are torch.compile
// modes timed separately (contract.BaselineModes).
const Eager = "eager"

// Blames that are not a verdict about a kernel (record.BlameTask and friends).
const (
	BlameKernel = "kernel"
)

// ClassGeneration is the class of an attempt that produced no kernel: the model call failed or
// its reply held no code. It counts as incorrect.
const ClassGeneration = "generation"

// Row is one attempt: one evaluated kernel, or one generation that gave no kernel.
type Row struct {
	Study    string `json:"study"`
	Task     string `json:"task"`
	Level    int    `json:"level"`
	Model    string `json:"model"`
	Backend  string `json:"backend"`
	Strategy string `json:"strategy"`
	Target   string `json:"target"`
	Seed     int64  `json:"seed"`
	// Hardware names the device the kernel ran on (the fingerprint's summary): the side of a
	// portability comparison.
	Hardware string `json:"hardware,omitempty"`
	Turn     int    `json:"turn"`
	Sample   int    `json:"sample"`
	Kernel   string `json:"kernel,omitempty"` // kernel hash; empty for a generation failure
	// Verdict is pass, fail or error; empty for a generation failure.
	Verdict string `json:"verdict,omitempty"`
	Class   string `json:"error_class,omitempty"`
	// Blame is empty or "kernel" for a verdict about the kernel; task, platform or environment
	// when something else failed: such a row says nothing about the model.
	Blame string   `json:"blame,omitempty"`
	Flags []string `json:"flags,omitempty"`
	// Speedup is eager's median over the candidate's, measured in the same evaluation (0 unless
	// the kernel passed).
	Speedup float64 `json:"speedup,omitempty"`
	// Versus holds the speedup against each torch.compile mode whose baseline was timed on the
	// same hardware fingerprint; a mode that is missing was not measured there.
	Versus map[string]float64 `json:"versus,omitempty"`
}

// Judged reports whether the row is a verdict about a kernel (or a generation failure, which
// counts against the model).
func (r Row) Judged() bool { return r.Blame == "" || r.Blame == BlameKernel }

// HasFlag reports whether the row carries any of the named flags.
func (r Row) HasFlag(names []string) bool {
	return slices.ContainsFunc(r.Flags, func(f string) bool { return slices.Contains(names, f) })
}

// Arm is the (model, backend, strategy, target, seed) a row belongs to.
type Arm struct {
	Model    string `json:"model"`
	Backend  string `json:"backend"`
	Strategy string `json:"strategy"`
	Target   string `json:"target"`
	Seed     int64  `json:"seed"`
}

// ArmOf returns the row's arm.
func ArmOf(r Row) Arm {
	return Arm{Model: r.Model, Backend: r.Backend, Strategy: r.Strategy, Target: r.Target, Seed: r.Seed}
}

// String names the arm compactly: model + backend + strategy @ target (seed when not 0).
func (a Arm) String() string {
	s := strings.Join([]string{a.Model, a.Backend, a.Strategy}, " + ") + " @ " + a.Target
	if a.Seed != 0 {
		s += " seed " + strconv.FormatInt(a.Seed, 10)
	}
	return s
}
