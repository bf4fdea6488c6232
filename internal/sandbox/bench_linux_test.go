package sandbox

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/kbplatform/kbplatform/internal/pyenv"
)

// What a worker's start pays for its sandbox: the helper's re-execution, the ruleset, the filter
// and the cgroup, against starting the program directly. The Python pair adds what Landlock costs
// the thousands of opens of torch's import. docs/benchmarks.md records both.
func benchStart(b *testing.B, sandboxed bool, name string, args ...string) {
	p := Policy{Env: Environ(os.Environ(), nil), ReadOnly: SystemPaths, Devices: DeviceFiles()}
	if py := os.Getenv("KBP_PYTHON"); py != "" {
		found, err := pyenv.Probe(context.Background(), py)
		if err != nil {
			b.Fatal(err)
		}
		p.ReadOnly = append(append([]string(nil), SystemPaths...), found.Paths...)
	}
	for b.Loop() {
		var cmd *exec.Cmd
		if sandboxed {
			var err error
			if cmd, err = Command(p, name, args...); err != nil {
				b.Fatal(err)
			}
		} else {
			cmd = exec.Command(name, args...)
			cmd.Env = p.Env
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

func BenchmarkStartTrue(b *testing.B) {
	b.Run("direct", func(b *testing.B) { benchStart(b, false, "/bin/true") })
	b.Run("sandboxed", func(b *testing.B) { benchStart(b, true, "/bin/true") })
}

func BenchmarkStartTorch(b *testing.B) {
	py := os.Getenv("KBP_PYTHON")
	if py == "" {
		b.Skip("KBP_PYTHON names no interpreter with torch")
	}
	b.Run("direct", func(b *testing.B) { benchStart(b, false, py, "-c", "import torch") })
	b.Run("sandboxed", func(b *testing.B) { benchStart(b, true, py, "-c", "import torch") })
}
