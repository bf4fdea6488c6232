package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/examples/kernels"
	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/internal/contract/worker"
	"github.com/kbplatform/kbplatform/internal/store"
)

// eval --hostile on the CPU: every kernel that tries to escape the evaluation is contained, each
// judged as the suite says, with the real sandbox, worker and target processes.
func TestEvalHostileContainsEveryExploit(t *testing.T) {
	env := isolated(t)
	env["KBP_PYTHON"] = "/usr/bin/python3"
	out, errOut, code := run(t, env, "eval", "--hostile", "--device", "cpu", "--seeds", "1", "--timed-calls", "10", "--warmup", "1", "--check-calls", "2")
	hs, err := kernels.LoadHostile()
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) < 20 {
		t.Fatalf("the suite has %d exploits, want at least 20", len(hs))
	}
	want := "hostile: " + itoa(len(hs)) + " exploits tried, " + itoa(len(hs)) + " contained"
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("eval --hostile: exit %d, want 0 and %q\n%s\n%s", code, want, out, errOut)
	}
}

// The judge sees an escape in the verdict, in a leaked canary and in a run-wide trace.
func TestHostileJudgeSeesEscapes(t *testing.T) {
	h := &hostileRun{canary: "kbp-canary-test", homes: []string{t.TempDir()}}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	entry := func(file, verdict, class string) kernels.Entry {
		return kernels.Entry{File: file, Hash: file, Expect: &kernels.Expect{Verdict: verdict, Class: class}}
	}
	want := map[string]kernels.Entry{
		"hostile/a.py": entry("hostile/a.py", "fail", "runtime_error"),
		"hostile/b.py": entry("hostile/b.py", "fail", "runtime_error"),
		"hostile/c.py": entry("hostile/c.py", "fail", ""),
	}
	ev := func(hash, verdict, class, log string) *store.Evaluation {
		return &store.Evaluation{ID: hash, Result: &contract.Result{Kernel: contract.Kernel{Hash: hash}, Verdict: verdict, ErrorClass: class, Log: log}}
	}
	stored := []*store.Evaluation{
		ev("hostile/a.py", "pass", "", ""),                                     // the escape worked
		ev("hostile/b.py", "fail", "runtime_error", "leaked: kbp-canary-test"), // failed, but leaked
		ev("hostile/c.py", "fail", "output_mismatch", "PermissionError"),       // contained
	}
	judge := func(cache string) map[string]bool {
		got := map[string]bool{}
		for _, v := range h.judge(st, stored, want, cache) {
			got[v.Name] = v.Contained
		}
		return got
	}
	cache := t.TempDir()
	if _, err := worker.Extract(filepath.Join(cache, "worker")); err != nil {
		t.Fatal(err)
	}
	if got := judge(cache); got["a"] || got["b"] || !got["c"] {
		t.Errorf("contained: %v, want only c (a passed, b leaked its canary)", got)
	}
	// A cache without the worker's files is a run-wide trace: every kernel is judged by it.
	if got := judge(t.TempDir()); got["c"] {
		t.Errorf("contained: %v although the worker's files are gone", got)
	}
}
