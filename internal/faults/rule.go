package faults

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// rule is one source pattern and what it becomes. Go's regular expressions have no
// backreferences, so a rule that needs two parts of a match to agree (the same loop variable in
// a loop's three clauses) checks them in repl and declines the match by returning false.
type rule struct {
	what  string   // what the rewrite does, when it names the mutant's variant
	langs []string // backends whose files it rewrites; empty: every backend
	re    *regexp.Regexp
	repl  func(m []string) (string, bool)
	// skipLine leaves alone a match on a line that matches it (a shape check, not a computation).
	skipLine *regexp.Regexp
	// edit, when set, rewrites the whole source in place of re and repl (an edit that adds code).
	edit func(src string) (string, int)
}

// variant is one way of committing a class's fault; its rules are tried in order and the first
// that changes a file makes that file's mutant.
type variant struct {
	name  string
	all   bool // apply every rule (the fault made everywhere), not only the first that matches
	rules []rule
}

func (r rule) appliesTo(backend string) bool {
	return len(r.langs) == 0 || slices.Contains(r.langs, backend)
}

// apply rewrites every match of the rule and returns the source and the number of places changed.
func (r rule) apply(src string) (string, int) {
	if r.edit != nil {
		return r.edit(src)
	}
	var b strings.Builder
	last, n := 0, 0
	for _, loc := range r.re.FindAllStringSubmatchIndex(src, -1) {
		if r.skipLine != nil && r.skipLine.MatchString(lineAt(src, loc[0])) {
			continue
		}
		m := make([]string, len(loc)/2)
		for i := range m {
			if loc[2*i] >= 0 {
				m[i] = src[loc[2*i]:loc[2*i+1]]
			}
		}
		out, ok := r.repl(m)
		if !ok {
			continue
		}
		b.WriteString(src[last:loc[0]])
		b.WriteString(out)
		last = loc[1]
		n++
	}
	if n == 0 {
		return src, 0
	}
	b.WriteString(src[last:])
	return b.String(), n
}

// lineAt is the line of src that holds byte i.
func lineAt(src string, i int) string {
	start := strings.LastIndexByte(src[:i], '\n') + 1
	end := strings.IndexByte(src[i:], '\n')
	if end < 0 {
		return src[start:]
	}
	return src[start : i+end]
}

// template is a repl that expands $1-style references (as many digits as follow the $).
func template(t string) func(m []string) (string, bool) {
	return func(m []string) (string, bool) { return expand(t, m), true }
}

func expand(t string, m []string) string {
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		if t[i] == '$' && i+1 < len(t) && t[i+1] >= '0' && t[i+1] <= '9' {
			j := i + 1
			for j < len(t) && t[j] >= '0' && t[j] <= '9' {
				j++
			}
			n, _ := strconv.Atoi(t[i+1 : j])
			b.WriteString(m[n])
			i = j - 1
			continue
		}
		b.WriteByte(t[i])
	}
	return b.String()
}

// same is a repl that applies t only when the submatches at idx are all equal (a loop's variable
// named alike in its clauses).
func same(t string, idx ...int) func(m []string) (string, bool) {
	return func(m []string) (string, bool) {
		for _, i := range idx[1:] {
			if m[i] != m[idx[0]] {
				return "", false
			}
		}
		return expand(t, m), true
	}
}
