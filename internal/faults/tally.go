package faults

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
)

// Outcome is what the contract made of one mutant.
type Outcome string

const (
	// Caught: the verdict is fail (any class but the two below), or a pass that carries a kernel
	// flag and so is no solution (sdk.KernelFlags).
	Caught Outcome = "caught"
	// Missed: a pass without a kernel flag; the fault would count as a solution.
	Missed Outcome = "missed"
	// Invalid: the mutant did not build or import. The mutation broke the file, so the contract
	// was not tested; it is counted apart and is a bug of the patterns.
	Invalid Outcome = "invalid"
	// NoVerdict: the task, the platform or the environment failed (verdict error).
	NoVerdict Outcome = "no_verdict"
	// Unjudged: the honest file the mutant came from did not pass cleanly at the campaign's size,
	// so what its mutant got says nothing about the fault.
	Unjudged Outcome = "unjudged"
)

// Judge classifies a mutant's result.
func Judge(r *sdk.Result) Outcome {
	switch {
	case r == nil || r.Verdict == sdk.VerdictError:
		return NoVerdict
	case r.Verdict == sdk.Fail && (r.ErrorClass == sdk.ClassCompile || r.ErrorClass == sdk.ClassLoad):
		return Invalid
	case r.Solution():
		return Missed
	}
	return Caught
}

// Got says in a few words what the result was: "fail output_mismatch", "pass [precision_downcast]".
func Got(r *sdk.Result) string {
	if r == nil {
		return "no result"
	}
	s := r.Verdict
	if r.ErrorClass != "" {
		s += " " + r.ErrorClass
	}
	var flags []string
	for _, f := range r.Flags {
		if sdk.KernelFlag(f.Name) {
			flags = append(flags, f.Name)
		}
	}
	if len(flags) > 0 {
		s += " [" + strings.Join(flags, ", ") + "]"
	}
	return s
}

// Finding is one mutant's outcome.
type Finding struct {
	Mutant  Mutant
	Outcome Outcome
	Got     string
}

// Row counts one language's mutants of one class (Class "" is the language's total).
type Row struct {
	Language                                                      string
	Class                                                         Class
	Mutants, Caught, Missed, Invalid, NoVerdict, Unjudged, NotApp int
}

// Rate is the share of judged mutants (caught or missed) that were caught; ok is false when none
// was judged.
func (r Row) Rate() (rate float64, ok bool) {
	if n := r.Caught + r.Missed; n > 0 {
		return float64(r.Caught) / float64(n), true
	}
	return 0, false
}

// Tally counts the findings per language and class, with the classes not applicable to each
// language's files; each language's rows end with its total (Class "").
func Tally(fs []Finding, na []NotApplicable) []Row {
	type key struct {
		lang  string
		class Class
	}
	rows := map[key]*Row{}
	langs := []string{}
	get := func(lang string, c Class) *Row {
		k := key{lang, c}
		if rows[k] == nil {
			rows[k] = &Row{Language: lang, Class: c}
			if !slices.Contains(langs, lang) {
				langs = append(langs, lang)
			}
		}
		return rows[k]
	}
	for _, f := range fs {
		for _, r := range []*Row{get(f.Mutant.Language(), f.Mutant.Class), get(f.Mutant.Language(), "")} {
			r.Mutants++
			switch f.Outcome {
			case Caught:
				r.Caught++
			case Missed:
				r.Missed++
			case Invalid:
				r.Invalid++
			case NoVerdict:
				r.NoVerdict++
			case Unjudged:
				r.Unjudged++
			}
		}
	}
	for _, n := range na {
		get(n.Origin.Backend, n.Class).NotApp++
		get(n.Origin.Backend, "").NotApp++
	}
	var out []Row
	for _, lang := range langs {
		for _, c := range Classes() {
			if r := rows[key{lang, c}]; r != nil {
				out = append(out, *r)
			}
		}
		out = append(out, *rows[key{lang, ""}])
	}
	return out
}

// Summary is the closing line of one language: "cpp: 43 mutants, 43 caught, 0 missed (100.0%)".
func (r Row) Summary() string {
	s := fmt.Sprintf("%s: %d mutants, %d caught, %d missed", r.Language, r.Mutants, r.Caught, r.Missed)
	if rate, ok := r.Rate(); ok {
		s += fmt.Sprintf(" (%.1f%% caught)", 100*rate)
	}
	var other []string
	for _, o := range []struct {
		n    int
		what string
	}{{r.Invalid, "invalid"}, {r.NoVerdict, "without a verdict"}, {r.Unjudged, "unjudged"}} {
		if o.n > 0 {
			other = append(other, fmt.Sprintf("%d %s", o.n, o.what))
		}
	}
	if len(other) > 0 {
		s += "; " + strings.Join(other, ", ")
	}
	return s
}
