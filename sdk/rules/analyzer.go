package rules

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/kbplatform/kbplatform/sdk/internal/pyscript"
)

// The analysis is Python reading Python: the standard library's ast parses the candidate exactly
// as the worker's interpreter will, aliases and all, which a Go regular expression cannot. It
// never imports the candidate, so it needs no torch and runs with any Python 3.9+.
//
//go:embed analyze.py
var script string

// Analyzer runs analyze.py with a Python interpreter.
type Analyzer struct {
	// Python is the interpreter; empty means $KBP_PYTHON, then python3 on PATH.
	Python string
	// Timeout bounds one analysis (default 30s): a pathological file must not hang a study.
	Timeout time.Duration
}

// Interpreter is the Python the analyzer will run.
func (a Analyzer) Interpreter() string { return pyscript.Interpreter(a.Python) }

// Analyze returns the facts of a candidate source against its task's reference source.
func (a Analyzer) Analyze(ctx context.Context, source, reference string) (*Facts, error) {
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	var f Facts
	if err := pyscript.Run(ctx, a.Python, timeout, script, map[string]string{"source": source, "reference": reference}, &f); err != nil {
		return nil, fmt.Errorf("static analysis with %w", err)
	}
	return &f, nil
}
