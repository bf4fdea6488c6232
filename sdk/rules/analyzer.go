package rules

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
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
func (a Analyzer) Interpreter() string {
	if a.Python != "" {
		return a.Python
	}
	if p := os.Getenv("KBP_PYTHON"); p != "" {
		return p
	}
	return "python3"
}

// Analyze returns the facts of a candidate source against its task's reference source.
func (a Analyzer) Analyze(ctx context.Context, source, reference string) (*Facts, error) {
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	in, err := json.Marshal(map[string]string{"source": source, "reference": reference})
	if err != nil {
		return nil, err
	}
	// -I: isolated from PYTHON* variables and the user's site-packages; -S: no site import at all.
	cmd := exec.CommandContext(ctx, a.Interpreter(), "-I", "-S", "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if len(msg) > 2000 {
			msg = msg[len(msg)-2000:]
		}
		return nil, fmt.Errorf("static analysis with %s: %w: %s", a.Interpreter(), err, msg)
	}
	var f Facts
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		return nil, fmt.Errorf("static analysis with %s: unreadable output: %w", a.Interpreter(), err)
	}
	return &f, nil
}
