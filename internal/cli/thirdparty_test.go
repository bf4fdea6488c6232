package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestThirdPartyStrategy builds the example strategy in its own module, drops it on the plugin
// path, locks it, and runs a real study with an unmodified kbplatform binary. Swapping the plugin
// binary needs a new lock, not a new kbplatform.
func TestThirdPartyStrategy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	tmp := t.TempDir()
	kbp := filepath.Join(tmp, "bin", "kbplatform")
	pluginDir := filepath.Join(tmp, "plugins")
	pluginBin := filepath.Join(pluginDir, "kbplugin-strategy-bestofn")
	build := func(dir, out string, extra ...string) {
		t.Helper()
		args := append([]string{"build", "-o", out}, extra...)
		args = append(args, ".")
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build in %s: %v\n%s", dir, err, b)
		}
	}
	build(filepath.Join(root, "cmd", "kbplatform"), kbp)
	build(filepath.Join(root, "examples", "strategy-plugin"), pluginBin)

	env := isolated(t)
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(kbp, append([]string{"--plugin-dir", pluginDir, "-q"}, args...)...)
		cmd.Env = os.Environ()
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Env = append(cmd.Env, "KBP_PLUGIN_LOCK="+filepath.Join(tmp, "plugins.lock"))
		b, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(b), code
	}
	line := func(out, prefix string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		return ""
	}

	out, _ := run("plugins", "list")
	if l := line(out, "strategy/bestofn"); !strings.Contains(l, "not locked") || !strings.Contains(l, "third-party") {
		t.Fatalf("before lock: %q\n%s", l, out)
	}
	if l := line(out, "target/local"); !strings.Contains(l, "built-in") {
		t.Fatalf("built-ins missing:\n%s", out)
	}
	study := []string{"study", "run", "--tasks", "kbp/l1/relu", "--model", "replay", "--model-config", `{"source":"examples","backend":"cpp"}`,
		"--strategy", "bestofn", "--strategy-config", `{"n":2}`, "--budget-evaluations", "2", "--device", "cpu",
		"--seeds", "1", "--timed-calls", "10", "--warmup", "1", "--check-calls", "2"}
	if out, code := run(study...); code == 0 || !strings.Contains(out, "not locked") {
		t.Fatalf("an unlocked plugin must not run: %d\n%s", code, out)
	}
	if out, code := run("plugins", "lock"); code != 0 || !strings.Contains(out, "locked strategy/bestofn 0.2.0") {
		t.Fatalf("lock: %d\n%s", code, out)
	}
	out, _ = run("plugins", "list")
	if l := line(out, "strategy/bestofn"); !strings.Contains(l, "in use") {
		t.Fatalf("after lock: %q", l)
	}
	out, code := run(study...)
	if code != 0 || !strings.Contains(out, "kbp/l1/relu") || !strings.Contains(out, "fast_0 1.00") {
		t.Fatalf("study: %d\n%s", code, out)
	}
	if l := line(out, "kbp/l1/relu"); !strings.Contains(l, " 2 ") || !strings.Contains(l, "yes") {
		t.Errorf("two attempts, correct: %q", l)
	}
	// The same study again: its task is done, nothing is re-run.
	out, code = run(study...)
	if code != 0 || !strings.Contains(out, "done (earlier run)") {
		t.Fatalf("resume: %d\n%s", code, out)
	}

	// Swap in another build of the plugin: refused until locked again, then used.
	build(filepath.Join(root, "examples", "strategy-plugin"), pluginBin, "-trimpath")
	out, code = run("plugins", "inspect", "strategy/bestofn")
	if code == 0 || !strings.Contains(out, "changed since it was locked") {
		t.Fatalf("swapped binary: %d\n%s", code, out)
	}
	if _, code := run("plugins", "lock"); code != 0 {
		t.Fatal("relock failed")
	}
	if out, code := run("plugins", "inspect", "strategy/bestofn"); code != 0 || !strings.Contains(out, "third-party") {
		t.Fatalf("after relock: %d\n%s", code, out)
	}
}
