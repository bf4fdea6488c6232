package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// run executes the CLI in-process with an isolated database, cache and config.
func run(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func isolated(t *testing.T) map[string]string {
	dir := t.TempDir()
	return map[string]string{
		"KBP_DB":        filepath.Join(dir, "db"),
		"KBP_WORK_DIR":  filepath.Join(dir, "work"),
		"KBP_CACHE_DIR": sharedCache(),
		"KBP_CONFIG":    "",
		"HOME":          dir, // no user config file leaks in
	}
}

func sharedCache() string { return filepath.Join(os.TempDir(), "kbp-cli-test-cache") }

func TestConfigPrecedence(t *testing.T) {
	env := isolated(t)
	cfgDir := t.TempDir()
	cfg := filepath.Join(cfgDir, "kbplatform.yaml")
	if err := os.WriteFile(cfg, []byte("contract:\n  seeds: 9\n  timed_calls: 33\ndevice: cpu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	get := func(extraEnv map[string]string, args ...string) map[string]any {
		t.Helper()
		for k, v := range env {
			extraEnv[k] = v
		}
		out, errOut, code := run(t, extraEnv, append([]string{"config", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("config: %d %s", code, errOut)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	seeds := func(m map[string]any) float64 { return m["contract"].(map[string]any)["seeds"].(float64) }

	if got := seeds(get(map[string]string{})); got != 5 {
		t.Errorf("default seeds: got %v, want 5", got)
	}
	m := get(map[string]string{}, "--config", cfg)
	if seeds(m) != 9 || m["device"] != "cpu" {
		t.Errorf("file: got seeds %v device %v", seeds(m), m["device"])
	}
	if got := seeds(get(map[string]string{"KBP_CONTRACT_SEEDS": "4"}, "--config", cfg)); got != 4 {
		t.Errorf("env over file: got %v, want 4", got)
	}
	if got := seeds(get(map[string]string{"KBP_CONTRACT_SEEDS": "4"}, "--config", cfg, "--seeds", "2")); got != 2 {
		t.Errorf("flag over env: got %v, want 2", got)
	}
	if _, errOut, code := run(t, env, "config", "--config", filepath.Join(cfgDir, "missing.yaml")); code == 0 || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("missing config file: code %d, %s", code, errOut)
	}
	if _, errOut, code := run(t, env, "config", "--seeds", "0"); code == 0 || !strings.Contains(errOut, "seeds") {
		t.Errorf("invalid seeds: code %d, %s", code, errOut)
	}
}

func TestTasksListShowImport(t *testing.T) {
	env := isolated(t)
	out, errOut, code := run(t, env, "tasks", "list", "--level", "1")
	if code != 0 || !strings.Contains(out, "kbp/l1/softmax") || strings.Contains(out, "kbp/l2/") {
		t.Fatalf("list: %d %s %s", code, out, errOut)
	}
	out, _, code = run(t, env, "tasks", "show", "kbp/l1/softmax", "--size", "cpu")
	if code != 0 || !strings.Contains(out, "class Model") || !strings.Contains(out, "distributions: default, scaled, large") {
		t.Fatalf("show: %d %s", code, out)
	}
	if _, errOut, code := run(t, env, "tasks", "show", "kbp/l1/nope"); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("unknown task: %d %s", code, errOut)
	}

	kb := t.TempDir()
	task := "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\nN = 16\n\ndef get_inputs():\n    return [torch.randn(N)]\n\ndef get_init_inputs():\n    return []\n"
	os.MkdirAll(filepath.Join(kb, "KernelBench", "level1"), 0o755)
	os.MkdirAll(filepath.Join(kb, "KernelBench", "level4"), 0o755)
	os.WriteFile(filepath.Join(kb, "KernelBench", "level1", "19_ReLU.py"), []byte(task), 0o644)
	os.WriteFile(filepath.Join(kb, "KernelBench", "level1", "99_Bad.py"), []byte("x = 1\n"), 0o644)
	os.WriteFile(filepath.Join(kb, "KernelBench", "level4", "1_gpt.py"), []byte(task), 0o644)
	out, errOut, code = run(t, env, "tasks", "import", "kernelbench", kb)
	if code != 0 || !strings.Contains(out, "imported 1 tasks") || !strings.Contains(out, "99_Bad.py") || !strings.Contains(out, "level4") {
		t.Fatalf("import: %d %s %s", code, out, errOut)
	}
	// The import is stored: a new invocation sees it, and the source no longer needs the checkout.
	os.RemoveAll(kb)
	out, _, code = run(t, env, "tasks", "list", "--origin", "kernelbench")
	if code != 0 || !strings.Contains(out, "kernelbench/l1/19_ReLU") {
		t.Fatalf("list after import: %d %s", code, out)
	}
	// An eager baseline over an import's tasks (the A/A over KernelBench), and a clear error for
	// an origin without tasks.
	out, errOut, code = run(t, env, "baseline", "--origin", "kernelbench", "--level", "1", "--modes", "eager", "--device", "cpu",
		"--seeds", "1", "--timed-calls", "10", "--warmup", "1", "--check-calls", "2", "-q")
	if code != 0 || !regexp.MustCompile(`kernelbench/l1/19_ReLU\s+\S+\s+eager\s.*(ok|unresolved)`).MatchString(out) || strings.Contains(out, "kbp/") {
		t.Fatalf("baseline --origin kernelbench: %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := run(t, env, "baseline", "--origin", "kernelbench", "--level", "3", "--modes", "eager", "--device", "cpu"); code == 0 || !strings.Contains(errOut, `no tasks of origin "kernelbench" at level 3`) {
		t.Errorf("baseline of an empty selection: %d %s", code, errOut)
	}
}

func TestEvalStoresAndResultsShow(t *testing.T) {
	env := isolated(t)
	kernel := filepath.Join("..", "..", "examples", "kernels", "relu", "cpp.py")
	args := []string{"eval", "--task", "kbp/l1/relu", "--kernel", kernel, "--device", "cpu", "--seeds", "1", "--timed-calls", "10", "--warmup", "1", "--check-calls", "2", "--json", "-q"}
	out, errOut, code := run(t, env, args...)
	if code != 0 {
		t.Fatalf("eval: %d\n%s\n%s", code, out, errOut)
	}
	var ev store.Evaluation
	if err := json.Unmarshal([]byte(out), &ev); err != nil {
		t.Fatalf("eval --json: %v\n%s", err, out)
	}
	if ev.Result.Verdict != "pass" || ev.Result.Timing == nil || ev.Result.Timing.Candidate.N != 10 || ev.ID == "" {
		t.Fatalf("unexpected record: %+v", ev.Result)
	}
	out, _, code = run(t, env, "results", "list")
	if code != 0 || !strings.Contains(out, ev.ID[:12]) || !strings.Contains(out, "PASS") {
		t.Fatalf("results list: %d %s", code, out)
	}
	out, _, code = run(t, env, "results", "show", ev.ID[:12])
	if code != 0 || !strings.Contains(out, "speedup") || !strings.Contains(out, "trials") {
		t.Fatalf("results show: %d %s", code, out)
	}

	// A kernel that fails: exit status 3, stored like any other.
	bad := filepath.Join(t.TempDir(), "bad.py")
	os.WriteFile(bad, []byte("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"), 0o644)
	out, errOut, code = run(t, env, "eval", "--task", "kbp/l1/relu", "--kernel", bad, "--device", "cpu", "--seeds", "1", "-q")
	if code != 3 || !strings.Contains(out, "FAIL") || !strings.Contains(out, "output_mismatch") {
		t.Fatalf("failing eval: %d %s %s", code, out, errOut)
	}
	out, _, _ = run(t, env, "results", "list", "--verdict", "fail")
	if !strings.Contains(out, "1 evaluations") {
		t.Errorf("stored failing evaluation: %s", out)
	}

	if _, errOut, code := run(t, env, "eval", "--task", "kbp/l1/relu", "--kernel", "/nonexistent.py", "--device", "cpu"); code == 0 || !strings.Contains(errOut, "nonexistent.py") {
		t.Errorf("missing kernel file: %d %s", code, errOut)
	}
	if _, errOut, code := run(t, env, "eval", "--kernel", kernel); code == 0 || !strings.Contains(errOut, "--task") {
		t.Errorf("missing --task: %d %s", code, errOut)
	}
}

// `baseline` stores the eager A/A measurement of a suite task with the contract that timed it and
// a link to the full evaluation record; an unknown mode is refused before anything runs.
func TestBaselineCommand(t *testing.T) {
	env := isolated(t)
	flags := []string{"--device", "cpu", "--seeds", "1", "--timed-calls", "10", "--warmup", "1", "--check-calls", "2", "-q"}
	out, errOut, code := run(t, env, append([]string{"baseline", "--task", "kbp/l1/softmax", "--modes", "eager"}, flags...)...)
	if code != 0 || !strings.Contains(out, "SPEEDUP") || !regexp.MustCompile(`kbp/l1/softmax\s+cpu\s+eager\s+[0-9.]+\s+[0-9.]+%\s+[0-9.]+\s+[0-9.]+x\s+-\s+(ok|unresolved)`).MatchString(out) {
		t.Fatalf("baseline table: %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = run(t, env, append([]string{"baseline", "--task", "kbp/l1/relu", "--modes", "eager", "--json"}, flags...)...)
	if code != 0 {
		t.Fatalf("baseline: %d\n%s\n%s", code, out, errOut)
	}
	var list []store.Baseline
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("baseline --json: %v\n%s", err, out)
	}
	if len(list) != 1 {
		t.Fatalf("want one baseline, got %d: %s", len(list), out)
	}
	b := list[0]
	if b.Verdict != "pass" || b.Mode != "eager" || b.Size != "cpu" || b.Stats == nil || b.Stats.N != 10 || b.Eager == nil || b.Speedup <= 0 {
		t.Fatalf("unexpected baseline: %+v", b)
	}
	if b.Contract != contract.Version || b.Evaluation == "" || b.Platform == "" {
		t.Fatalf("baseline without its contract, evaluation or platform: %+v", b)
	}
	out, _, code = run(t, env, "results", "show", b.Evaluation[:12])
	if code != 0 || !strings.Contains(out, "baseline:eager") {
		t.Fatalf("the baseline's evaluation is not stored: %d %s", code, out)
	}
	// The baseline says the speedup is unresolved exactly when its evaluation is flagged so.
	out, _, code = run(t, env, "results", "show", b.Evaluation[:12], "--json")
	var ev store.Evaluation
	if err := json.Unmarshal([]byte(out), &ev); code != 0 || err != nil || ev.Result == nil {
		t.Fatalf("results show --json: %d %v\n%s", code, err, out)
	}
	if b.Unresolved != ev.Result.FlagReason(sdk.FlagTimingUnresolved) {
		t.Errorf("baseline unresolved %q, evaluation flags %v", b.Unresolved, ev.Result.Flags)
	}
	if _, errOut, code := run(t, env, "baseline", "--task", "kbp/l1/relu", "--modes", "turbo", "--device", "cpu"); code == 0 || !strings.Contains(errOut, "unknown mode") {
		t.Errorf("unknown mode: %d %s", code, errOut)
	}
}
