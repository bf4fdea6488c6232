package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidationsAreKeptWithTheTask: `tasks validate` keeps what it found with the task, and
// `tasks show` prints it: the probed distributions kept and refused with the reason, and, once
// the task file changes, that it must be validated again. A task never validated says so.
func TestValidationsAreKeptWithTheTask(t *testing.T) {
	env := isolated(t)
	env["KBP_PYTHON"] = "/usr/bin/python3"
	task := filepath.Join(t.TempDir(), "rand_log.py")
	// log(x + 1e-3) on torch.rand inputs: not finite under negated or uniform inputs, fine under
	// small ones (the contract's own test task).
	b, err := os.ReadFile(filepath.Join("..", "contract", "testdata", "tasks", "rand_log.py"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	if err := os.WriteFile(task, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, _ := run(t, env, "tasks", "show", task)
	if !strings.Contains(out, "validated:     never") {
		t.Errorf("an unvalidated task:\n%s", out)
	}
	out, errOut, code := run(t, env, "tasks", "validate", task, "--device", "cpu")
	if code != 0 || !strings.Contains(out, "probe trials under small") || !strings.Contains(out, "no probe trial under negated (the reference's output is not finite)") {
		t.Fatalf("validate: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = run(t, env, "tasks", "show", task)
	if code != 0 || !strings.Contains(out, "validated:     cpu, size default") || !strings.Contains(out, ": ok; probe trials under small; no probe trial under negated") {
		t.Fatalf("show after validate: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out, "changed since") {
		t.Errorf("an unchanged task reads as changed:\n%s", out)
	}
	if err := os.WriteFile(task, []byte(strings.Replace(src, "1e-3", "1e-2", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, _ = run(t, env, "tasks", "show", task)
	if !strings.Contains(out, "the task changed since: validate it again") {
		t.Errorf("a changed task:\n%s", out)
	}
}
