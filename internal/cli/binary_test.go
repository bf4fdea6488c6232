package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// buildKbplatform builds the real binary into a temporary folder (the Go build cache makes a
// second build cheap).
func buildKbplatform(t *testing.T) string {
	t.Helper()
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	out := filepath.Join(t.TempDir(), "bin", "kbplatform")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = filepath.Join(root, "cmd", "kbplatform")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// binaryRunner runs the built binary with the test's isolated environment.
type binaryRunner struct {
	t   *testing.T
	bin string
	env map[string]string
}

func (r binaryRunner) command(args ...string) *exec.Cmd {
	cmd := exec.Command(r.bin, args...)
	cmd.Env = os.Environ()
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// run returns stdout, stderr and the exit status.
func (r binaryRunner) run(args ...string) (string, string, int) {
	r.t.Helper()
	cmd := r.command(args...)
	var out, errOut bytesBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}
