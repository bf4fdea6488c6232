// Package pyscript runs a standard-library Python script embedded in the SDK: JSON in on stdin,
// JSON out on stdout, isolated from the user's environment (-I: no PYTHON* variables or user
// site-packages; -S: no site import), bounded in time. The static rules and the structured
// feedback diff are both Python reading Python this way.
package pyscript

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Interpreter is the Python to run: python when set, else $KBP_PYTHON, else python3 on PATH.
func Interpreter(python string) string {
	if python != "" {
		return python
	}
	if p := os.Getenv("KBP_PYTHON"); p != "" {
		return p
	}
	return "python3"
}

// Run runs script with the interpreter, sends in as JSON and decodes what it prints into out.
// The error says what failed, with the end of the script's stderr.
func Run(ctx context.Context, python string, timeout time.Duration, script string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	py := Interpreter(python)
	cmd := exec.CommandContext(ctx, py, "-I", "-S", "-c", script)
	cmd.Stdin = bytes.NewReader(b)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = msg[len(msg)-2000:]
		}
		return fmt.Errorf("%s: %w: %s", py, err, msg)
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("%s: unreadable output: %w", py, err)
	}
	return nil
}
