package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

// refine runs as a built-in plugin process: two turns of the replayed C++ ReLU on the CPU, the
// second prompt carrying the first kernel's code and verdict, and every attempt's trajectory
// (turn, parent, prompt, feedback) surviving the plugin boundary and the store.
func TestStudyRefine(t *testing.T) {
	env := isolated(t)
	out, errOut, code := run(t, env, "study", "run", "--tasks", "kbp/l1/relu", "--model", "replay",
		"--model-config", `{"source":"examples","backend":"cpp"}`, "--backend", "cpp",
		"--strategy", "refine", "--strategy-config", `{"turns": 2, "feedback": "G+E+P"}`, "--device", "cpu",
		"--seeds", "1", "--timed-calls", "5", "--warmup", "1", "--check-calls", "1", "-q")
	if code != 0 {
		t.Fatalf("study run: exit %d\n%s\n%s", code, out, errOut)
	}
	id := strings.TrimSuffix(strings.Fields(lineWith(out, "study "))[1], ":")
	show, errOut, code := run(t, env, "study", "show", id, "--json")
	if code != 0 {
		t.Fatalf("study show: exit %d\n%s", code, errOut)
	}
	var got struct {
		Attempts []struct {
			sdk.Attempt
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(show), &got); err != nil {
		t.Fatalf("%v\n%s", err, show)
	}
	if len(got.Attempts) != 2 {
		t.Fatalf("%d attempts, want 2:\n%s", len(got.Attempts), show)
	}
	first, second := got.Attempts[0].Attempt, got.Attempts[1].Attempt
	if first.Step == 1 {
		first, second = second, first
	}
	if first.Turn != 0 || first.ParentStep != -1 || first.FeedbackKind != "none" || first.Feedback != "" || len(first.Prompt) < 2 {
		t.Errorf("first attempt: %+v", first)
	}
	if second.Turn != 1 || second.ParentStep != 0 || second.FeedbackKind != "raw G+E+P" || second.EvaluationID == "" {
		t.Errorf("second attempt: turn %d parent %d kind %q evaluation %q", second.Turn, second.ParentStep, second.FeedbackKind, second.EvaluationID)
	}
	for _, want := range []string{"## Your kernel of turn 0", "load_inline", "Verdict: pass", "Speedup over eager PyTorch", "### Profile"} {
		if !strings.Contains(second.Feedback, want) {
			t.Errorf("second feedback lacks %q:\n%s", want, second.Feedback)
		}
	}
	if last := second.Prompt[len(second.Prompt)-1].Content; !strings.Contains(last, second.Feedback) {
		t.Errorf("the second prompt lacks its feedback:\n%s", last)
	}
}
