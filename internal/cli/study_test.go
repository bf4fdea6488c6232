package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/internal/study"
)

// A strategy plugin that crashes mid-study costs its task only: what was stored stays stored, the
// study reports the crash, and running it again skips the finished task and retries the other.
func TestStudySurvivesACrashingStrategy(t *testing.T) {
	env := isolated(t)
	dir := t.TempDir()
	exe, _ := os.Executable()
	script := fmt.Sprintf("#!/bin/sh\nKBP_TEST_PLUGIN=crashing-strategy exec %q -test.run=^$ \"$@\"\n", exe)
	if err := os.WriteFile(filepath.Join(dir, "kbplugin-strategy-crashing"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env["KBP_PLUGIN_LOCK"] = filepath.Join(dir, "plugins.lock")
	env["KBP_PLUGIN_PATH"] = dir
	if out, _, code := run(t, env, "plugins", "lock"); code != 0 || !strings.Contains(out, "strategy/crashing") {
		t.Fatalf("lock: %d %s", code, out)
	}
	args := []string{"study", "run", "--tasks", "kbp/l1/relu,kbp/l1/softmax", "--model", "replay",
		"--model-config", `{"source":"examples","backend":"cpp"}`, "--strategy", "crashing", "--device", "cpu",
		"--seeds", "1", "--timed-calls", "10", "--warmup", "1", "--check-calls", "2", "-q"}
	out, errOut, code := run(t, env, args...)
	if code != 3 {
		t.Fatalf("exit %d, want 3\n%s\n%s", code, out, errOut)
	}
	var relu, softmax string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "kbp/l1/relu") {
			relu = l
		}
		if strings.HasPrefix(l, "kbp/l1/softmax") {
			softmax = l
		}
	}
	if !strings.Contains(relu, "done") || !strings.Contains(relu, "yes") {
		t.Errorf("relu: %q", relu)
	}
	if !strings.Contains(softmax, "crashed") && !strings.Contains(softmax, "died") {
		t.Errorf("softmax should report the crash: %q", softmax)
	}
	// The softmax evaluation stored before the crash is still there.
	list, _, _ := run(t, env, "results", "list", "--task", "kbp/l1/softmax")
	if !strings.Contains(list, "1 evaluations") {
		t.Errorf("evaluation before the crash lost:\n%s", list)
	}
	out, _, code = run(t, env, args...)
	if code != 3 || !strings.Contains(out, "done (earlier run)") {
		t.Fatalf("second run: %d\n%s", code, out)
	}
	// `study show` says why each task ended as it did, not only that it is done.
	id := strings.TrimSuffix(strings.Fields(lineWith(out, "study "))[1], ":")
	show, _, code := run(t, env, "study", "show", id)
	if code != 0 || !strings.Contains(show, "REASON") {
		t.Fatalf("study show: %d\n%s", code, show)
	}
	for _, l := range strings.Split(show, "\n") {
		if strings.HasPrefix(l, "kbp/l1/relu") && !strings.Contains(l, "pass") {
			t.Errorf("relu's reason missing: %q", l)
		}
	}
}

// A pass carrying a kernel flag is no solution in the summary; the figure counting it stands
// beside each fast_p, its row says flagged, and units that never ran are left out and counted.
func TestRenderStudyFlaggedAndNotRun(t *testing.T) {
	rep := &study.Report{Study: "cccccccccccccccccccc", Outcomes: []study.TaskOutcome{
		{Task: "a", Done: true, Correct: true, BestSpeedup: 1.5, Reason: "pass, best 1.50x"},
		{Task: "b", Done: true, Flagged: true, FlaggedSpeedup: 1.002, Reason: "passed only with a kernel flag (no solution), best 1.00x"},
		{Task: "c", Done: true, Reason: "fail output_mismatch"},
		{Task: "d", Done: true, Correct: true, BestSpeedup: 0.8},
		{Task: "e"},
	}}
	var b bytes.Buffer
	renderStudy(&b, rep)
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"b done 0 flagged (1.00x)",
		"e not run",
		"fast_0 0.50, 0.75 counting flagged; fast_1 0.25, 0.50 counting flagged;",
		"(4 tasks; 1 of 5 units did not run, left out: run the study again to resume)",
		"a pass carrying a kernel flag (no_custom_kernel, torch_delegation, input_insensitive, precision_downcast) is no solution",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}
