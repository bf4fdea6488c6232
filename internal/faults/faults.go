// Package faults derives faulty variants (mutants) of the honest example kernels, one per fault
// class and kernel file, by rewriting their source with patterns, and scores what the contract
// makes of them. A campaign (kbplatform campaign faults) runs every mutant through the contract
// and counts how many it catches; docs/contract.md, "Fault-injection campaign", says what the
// numbers mean.
//
// A mutation is a source transformation of one honest file, never a file written by hand: so the
// campaign measures the contract against the faults a model makes in kernels like the bundled
// ones, and a new example kernel gets its mutants for free. A class whose patterns do not match a
// file is counted as not applicable to it, never dropped silently.
package faults

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/kbplatform/kbplatform/examples/kernels"
)

// Class is a kind of fault.
type Class string

// The fault classes, in the order tables list them.
const (
	NegativeBranch Class = "negative_branch" // ReLU-like max dropped: negative inputs pass through
	OffByOne       Class = "off_by_one"      // a loop stops one element early
	TailUnhandled  Class = "tail_unhandled"  // the size is assumed to be a multiple of the block
	WrongAxis      Class = "wrong_axis"      // the reduction runs along another dimension
	WrongEpsilon   Class = "wrong_epsilon"   // a normalisation's epsilon is ten times the task's
	LowPrecision   Class = "low_precision"   // fp16/bf16 accumulation or operands in an fp32 task
	Unwritten      Class = "unwritten"       // part of the output is never written
	MissingSync    Class = "missing_sync"    // a __syncthreads() dropped (GPU)
	CachedResult   Class = "cached_result"   // the output cached by input pointer, or computed once
)

// Classes lists every class.
func Classes() []Class {
	return []Class{NegativeBranch, OffByOne, TailUnhandled, WrongAxis, WrongEpsilon, LowPrecision, Unwritten, MissingSync, CachedResult}
}

// Describe says in a few words what a class does to a kernel.
func (c Class) Describe() string {
	switch c {
	case NegativeBranch:
		return "ReLU-like max dropped: negative inputs pass through"
	case OffByOne:
		return "a loop bound one short: the last element is skipped"
	case TailUnhandled:
		return "the remainder after the last full block or chunk is not computed"
	case WrongAxis:
		return "the reduction or row length taken along another dimension"
	case WrongEpsilon:
		return "the normalisation's epsilon ten times the task's"
	case LowPrecision:
		return "fp16/bf16 accumulation or operands where the task is fp32"
	case Unwritten:
		return "part of the output (or of an intermediate) never written"
	case MissingSync:
		return "__syncthreads() dropped between shared-memory writes and reads"
	case CachedResult:
		return "output cached by input pointer, or computed once and returned again"
	}
	return string(c)
}

// Mutant is one faulty variant of an honest kernel.
type Mutant struct {
	Class   Class
	Variant string // which rule (or edit) made it, e.g. "remainder loop"
	Sites   int    // how many places the rule changed
	Origin  kernels.Entry
	Source  string
	Hash    string
}

// Language is the kernel language of the origin (its backend: cpp, cuda, triton, cutlass).
func (m Mutant) Language() string { return m.Origin.Backend }

// Name identifies the mutant in tables and records: the honest file, the class, the variant.
func (m Mutant) Name() string {
	return fmt.Sprintf("%s [%s: %s]", m.Origin.Name(), m.Class, m.Variant)
}

// NotApplicable is a class none of whose patterns matched a file.
type NotApplicable struct {
	Class  Class
	Origin kernels.Entry
}

// Generate derives every mutant of the honest kernels: for each file and class, each variant of
// the class whose patterns match the file gives one mutant. A class that gives a file no mutant is
// listed as not applicable to it.
func Generate(origins []kernels.Entry) ([]Mutant, []NotApplicable) {
	var out []Mutant
	var na []NotApplicable
	for _, o := range origins {
		for _, c := range Classes() {
			ms := mutate(c, o)
			if len(ms) == 0 {
				na = append(na, NotApplicable{Class: c, Origin: o})
			}
			out = append(out, ms...)
		}
	}
	return out, na
}

// mutate applies class c to one origin. Each variant of the class gives at most one mutant: a
// variant that commits its fault everywhere applies all of its rules; any other takes the first of
// its rules that changes the source, at every place that rule matches.
func mutate(c Class, o kernels.Entry) []Mutant {
	var out []Mutant
	for _, v := range variants(c) {
		src, sites, what := o.Source, 0, v.name
		for _, r := range v.rules {
			if !r.appliesTo(o.Backend) {
				continue
			}
			s, n := r.apply(src)
			if n == 0 || s == src {
				continue
			}
			src, sites = s, sites+n
			if !v.all {
				if r.what != "" {
					what = r.what
				}
				break
			}
		}
		if sites == 0 {
			continue
		}
		src = header(c, what, o) + src
		h := sha256.Sum256([]byte(src))
		out = append(out, Mutant{Class: c, Variant: what, Sites: sites, Origin: o, Source: src, Hash: hex.EncodeToString(h[:])})
	}
	return out
}

// header is the mutant's first line: what it is and where it came from, so that a stored mutant
// read back (results show) says so itself.
func header(c Class, variant string, o kernels.Entry) string {
	return fmt.Sprintf("# kbplatform fault campaign: a %s mutant (%s) of %s; it is wrong on purpose.\n",
		c, strings.ReplaceAll(variant, "\n", " "), o.Name())
}
