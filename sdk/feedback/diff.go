package feedback

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	udiff "github.com/aymanbagabas/go-udiff"
	"github.com/kbplatform/kbplatform/sdk/internal/pyscript"
)

// The structured diff is Python reading Python, as sdk/rules' analysis is: the standard library's
// ast parses both kernels exactly as the worker's interpreter would, without importing them (no
// torch needed, any Python 3.8+).
//
//go:embed astdiff.py
var astdiffScript string

// Differ diffs two kernels by top-level definition, falling back to a plain text diff (with a
// note that says why) when Python is missing or a kernel does not parse.
type Differ struct {
	// Python is the interpreter; empty means $KBP_PYTHON, then python3 on PATH.
	Python string
	// Timeout bounds one diff (default 20s).
	Timeout time.Duration
}

// Interpreter is the Python the differ runs.
func (d Differ) Interpreter() string { return pyscript.Interpreter(d.Python) }

// Change is one top-level definition that differs.
type Change struct {
	Change string `json:"change"` // added, removed, changed
	What   string `json:"what"`   // "method ModelNew.forward", "assignment cuda_src (string)"
	Diff   string `json:"diff"`   // unified lines of a changed definition; an added string's text
}

// Structured returns the changes from old to new, or an error when Python is unavailable or a
// kernel does not parse.
func (d Differ) Structured(ctx context.Context, old, new string) ([]Change, error) {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	var res struct {
		OK      bool     `json:"ok"`
		Error   string   `json:"error"`
		Changes []Change `json:"changes"`
	}
	if err := pyscript.Run(ctx, d.Python, timeout, astdiffScript, map[string]string{"old": old, "new": new}, &res); err != nil {
		return nil, fmt.Errorf("python could not diff the kernels: %w", err)
	}
	if !res.OK {
		return nil, fmt.Errorf("%s", res.Error)
	}
	return res.Changes, nil
}

// Diff writes the structured diff from old to new for the model, bounded to MaxDiff bytes; a
// plain unified diff, with the reason, when the structured one cannot be had.
func (d Differ) Diff(ctx context.Context, old, new string) string {
	changes, err := d.Structured(ctx, old, new)
	if err != nil {
		text := udiff.Unified("before", "after", old, new)
		if text == "" {
			return "(no difference)\n"
		}
		return fmt.Sprintf("(a plain text diff: %s)\n%s", err, fence("diff", Cut(text, MaxDiff, "diff")))
	}
	if len(changes) == 0 {
		return "(no change to any definition: the two files differ at most in layout and comments)\n"
	}
	var w strings.Builder
	for _, c := range changes {
		fmt.Fprintf(&w, "- %s %s", c.Change, c.What)
		body := strings.TrimRight(c.Diff, "\n")
		if body == "" {
			w.WriteString("\n")
			continue
		}
		lang := "diff"
		if c.Change == "added" {
			lang = "text"
		}
		w.WriteString(":\n")
		w.WriteString(fence(lang, body))
	}
	return Cut(w.String(), MaxDiff, "diff")
}
