// Package rules is the static-check engine every backend shares: a backend's rules are data (a
// YAML list embedded in its plugin), each naming a check, whether it warns or rejects, the result
// flag it raises and its reason; the engine evaluates them over the Facts analyze.py finds.
package rules

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kbplatform/kbplatform/sdk"
)

// Actions a rule takes.
const (
	Warn   = "warn"
	Reject = "reject"
)

// Checks a rule can name. Each is documented in docs/backends.md.
const (
	CheckModelNewMissing   = "modelnew_missing"
	CheckParseError        = "parse_error"
	CheckKernelMissing     = "kernel_missing"      // no kernel of Language defined
	CheckKernelNotLaunched = "kernel_not_launched" // defined, but forward never launches it
	CheckKernelPresent     = "kernel_present"      // a kernel of Language (a foreign one) is defined
	CheckTorchDelegation   = "torch_delegation"    // forward reaches every operator the reference computes with
	CheckTorchPartial      = "torch_partial"       // forward reaches some of them
	CheckTorchFallback     = "torch_fallback"      // PyTorch operators inside except handlers
	CheckThreads           = "threads"
	CheckHarnessPatching   = "harness_patching"
	CheckPrecisionDowncast = "precision_downcast" // only when the reference is full precision
	CheckDynamicCode       = "dynamic_code"       // eval, exec, getattr(torch, computed name)
	CheckPattern           = "pattern"            // Pattern matches the source
)

var checks = []string{CheckModelNewMissing, CheckParseError, CheckKernelMissing, CheckKernelNotLaunched,
	CheckKernelPresent, CheckTorchDelegation, CheckTorchPartial, CheckTorchFallback, CheckThreads,
	CheckHarnessPatching, CheckPrecisionDowncast, CheckDynamicCode, CheckPattern}

// Checks lists every check the engine knows.
func Checks() []string { return slices.Clone(checks) }

// Languages the analysis recognises kernels of.
var languages = []string{"cuda", "cutlass", "cpp", "triton"}

// Rule is one entry of a rule file.
type Rule struct {
	ID       string `yaml:"id"`
	Check    string `yaml:"check"`
	Language string `yaml:"language,omitempty"`
	Pattern  string `yaml:"pattern,omitempty"`
	// Match is a line the pattern must match: the rule's own positive example.
	Match  string `yaml:"match,omitempty"`
	Action string `yaml:"action"`
	Flag   string `yaml:"flag,omitempty"`
	Reason string `yaml:"reason"`
}

// Set is a parsed rule file.
type Set struct {
	rules    []Rule
	patterns map[string]*regexp.Regexp
}

var reName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// Parse reads a rule file (a YAML list of rules), rejecting unknown keys, checks and actions.
func Parse(data []byte) (*Set, error) {
	var rs []Rule
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&rs); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	s := &Set{rules: rs, patterns: map[string]*regexp.Regexp{}}
	seen := map[string]bool{}
	for i, r := range rs {
		where := fmt.Sprintf("rules: rule %d (%s)", i+1, r.ID)
		switch {
		case !reName.MatchString(r.ID):
			return nil, fmt.Errorf("%s: id must be lower-case letters, digits, - and _", where)
		case seen[r.ID]:
			return nil, fmt.Errorf("%s: duplicate id", where)
		case !slices.Contains(checks, r.Check):
			return nil, fmt.Errorf("%s: unknown check %q (known: %s)", where, r.Check, strings.Join(checks, ", "))
		case r.Action != Warn && r.Action != Reject:
			return nil, fmt.Errorf("%s: action must be warn or reject, not %q", where, r.Action)
		case strings.TrimSpace(r.Reason) == "":
			return nil, fmt.Errorf("%s: a rule needs its reason", where)
		case r.Flag != "" && !reName.MatchString(r.Flag):
			return nil, fmt.Errorf("%s: flag %q is not a stable name", where, r.Flag)
		}
		seen[r.ID] = true
		needsLang := r.Check == CheckKernelMissing || r.Check == CheckKernelNotLaunched || r.Check == CheckKernelPresent
		if needsLang != (r.Language != "") || (needsLang && !slices.Contains(languages, r.Language)) {
			return nil, fmt.Errorf("%s: check %s takes a language (one of %s) and only it does", where, r.Check, strings.Join(languages, ", "))
		}
		if (r.Check == CheckPattern) != (r.Pattern != "") {
			return nil, fmt.Errorf("%s: check pattern takes a pattern and only it does", where)
		}
		if r.Pattern != "" {
			re, err := regexp.Compile(r.Pattern)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if r.Match == "" || !re.MatchString(r.Match) {
				return nil, fmt.Errorf("%s: the pattern must match its own example (match: %q)", where, r.Match)
			}
			s.patterns[r.ID] = re
		}
	}
	return s, nil
}

// MustParse parses an embedded rule file; a broken one is a bug in the plugin, caught by its tests.
func MustParse(data []byte) *Set {
	s, err := Parse(data)
	if err != nil {
		panic(err)
	}
	return s
}

// Rules returns the rules in file order.
func (s *Set) Rules() []Rule { return slices.Clone(s.rules) }

// Apply evaluates every rule over the facts and the source; findings come in rule order.
func (s *Set) Apply(f *Facts, source string) []sdk.Issue {
	var out []sdk.Issue
	for _, r := range s.rules {
		evidence, hit := s.eval(r, f, source)
		if !hit {
			continue
		}
		sev := sdk.SeverityWarning
		if r.Action == Reject {
			sev = sdk.SeverityError
		}
		msg := r.Reason
		if len(evidence) > 0 {
			if len(evidence) > 4 {
				evidence = append(evidence[:4], fmt.Sprintf("and %d more", len(evidence)-4))
			}
			msg += ": " + strings.Join(evidence, "; ")
		}
		out = append(out, sdk.Issue{Severity: sev, Code: r.ID, Message: msg, Flag: r.Flag})
	}
	return out
}

func (s *Set) eval(r Rule, f *Facts, source string) ([]string, bool) {
	switch r.Check {
	case CheckModelNewMissing:
		return nil, f.ParseError == "" && !f.HasModelNew
	case CheckParseError:
		return []string{f.ParseError}, f.ParseError != ""
	}
	if f.ParseError != "" {
		return nil, false // nothing below can be known about a file that does not parse
	}
	k := f.Kernels[r.Language]
	switch r.Check {
	case CheckKernelMissing:
		return nil, len(k.Defined) == 0
	case CheckKernelNotLaunched:
		return k.Defined, len(k.Defined) > 0 && len(k.Launched) == 0
	case CheckKernelPresent:
		return k.Defined, len(k.Defined) > 0
	case CheckTorchDelegation, CheckTorchPartial:
		var reached, kept []string
		for _, op := range f.ReferenceOps {
			if ev, ok := f.ReachedOps[op]; ok {
				reached = append(reached, op+" ("+ev+")")
			} else {
				kept = append(kept, op)
			}
		}
		if r.Check == CheckTorchDelegation {
			return reached, len(f.ReferenceOps) > 0 && len(kept) == 0
		}
		return reached, len(reached) > 0 && len(kept) > 0
	case CheckTorchFallback:
		return describe(f.FallbackOps), len(f.FallbackOps) > 0
	case CheckThreads:
		return f.Threads, len(f.Threads) > 0
	case CheckHarnessPatching:
		return f.Patches, len(f.Patches) > 0
	case CheckPrecisionDowncast:
		return f.Downcasts, !f.ReferenceLowPrecision && len(f.Downcasts) > 0
	case CheckDynamicCode:
		return f.Dynamic, len(f.Dynamic) > 0
	case CheckPattern:
		var lines []string
		for i, l := range strings.Split(source, "\n") {
			if s.patterns[r.ID].MatchString(l) {
				lines = append(lines, fmt.Sprintf("line %d: %s", i+1, strings.TrimSpace(l)))
			}
		}
		return lines, len(lines) > 0
	}
	return nil, false
}

func describe(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, op := range slices.Sorted(maps.Keys(m)) {
		out = append(out, op+" ("+m[op]+")")
	}
	return out
}

// Checker analyses a candidate and applies a rule set: what a backend's Check does.
type Checker struct {
	Rules    *Set
	Analyzer Analyzer
}

// Check runs the analysis and the rules. A task without source is checked without a reference
// (no delegation findings).
func (c Checker) Check(ctx context.Context, source string, task sdk.Task) ([]sdk.Issue, error) {
	f, err := c.Analyzer.Analyze(ctx, source, task.Source)
	if err != nil {
		return nil, err
	}
	return c.Rules.Apply(f, source), nil
}
