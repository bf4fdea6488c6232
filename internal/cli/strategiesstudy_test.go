package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/plugins/models/openai/openaitest"
)

// wrongReLU compiles and runs, and is wrong: it returns |x|.
const wrongReLU = "```python\n" + `import torch
from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>
torch::Tensor relu_abs(torch::Tensor x) {
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    const float* s = xc.data_ptr<float>();
    float* d = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) d[i] = s[i] < 0.0f ? -s[i] : s[i];
    return y;
}
"""
_ext = load_inline(name="kbp_test_relu_abs", cpp_sources=_src, functions=["relu_abs"], verbose=False)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.relu_abs(x)
` + "```\n"

// One study file runs every strategy at the same budget against a scripted model that writes a
// wrong ReLU until the feedback it is sent says why (a failed verdict); then the right one. So the
// arms that send the evaluation back (refine G+E and G+E+P, backtrack) end correct and those that
// do not (oneshot, sampling, refine G) do not. The report, the plots and the three exports are
// made from the stored study.
func TestStrategiesStudyFile(t *testing.T) {
	right, err := os.ReadFile(filepath.Join("..", "..", "examples", "kernels", "relu", "cpp.py"))
	if err != nil {
		t.Fatal(err)
	}
	srv := openaitest.New(t, func(_ int, body map[string]any, w http.ResponseWriter) {
		msgs, _ := body["messages"].([]any)
		last := ""
		if len(msgs) > 0 {
			m, _ := msgs[len(msgs)-1].(map[string]any)
			last, _ = m["content"].(string)
		}
		reply := wrongReLU
		if strings.Contains(last, "Verdict: fail") {
			reply = "Fixed:\n```python\n" + string(right) + "```\n"
		}
		texts := make([]string, openaitest.N(body))
		for i := range texts {
			texts[i] = reply
		}
		openaitest.Completion(w, nil, texts...)
	})
	env := isolated(t)
	env["KBP_TEST_KEY"] = "sk-test"
	dir := t.TempDir()
	file := filepath.Join(dir, "strategies.yaml")
	body := fmt.Sprintf(`name: strategies-at-equal-budget-ci
tasks: [kbp/l1/relu]
size: cpu
device: cpu
model:
  name: openai
  config: {base_url: %q, model: m, api_key_env: KBP_TEST_KEY}
backend:
  name: cpp
strategies:
  - {name: oneshot, ref: oneshot}
  - {name: sampling@2, ref: sampling, config: {k: 2, temperature: 0.8}}
  - {name: refine-G@2, ref: refine, config: {turns: 2, feedback: G}}
  - {name: refine-GE@2, ref: refine, config: {turns: 2, feedback: G+E}}
  - {name: refine-GEP@2, ref: refine, config: {turns: 2, feedback: G+E+P}}
  - {name: backtrack@2, ref: backtrack, config: {turns: 2, feedback: G+E+P}}
seeds: [0]
budget: {generations: 2, evaluations: 2}
parallel: 2
`, srv.BaseURL())
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, env, "study", "run", file, "--seeds", "1", "--timed-calls", "5", "--warmup", "1", "--check-calls", "1", "-q")
	if code != 0 && code != 3 {
		t.Fatalf("study run: exit %d\n%s\n%s", code, out, errOut)
	}
	id := strings.TrimSuffix(strings.Fields(lineWith(out, "study "))[1], ":")

	rep, errOut, code := run(t, env, "study", "report", id, "--json")
	if code != 0 {
		t.Fatalf("study report: exit %d: %s", code, errOut)
	}
	var got struct {
		Arms []struct {
			Parts struct {
				Strategy string `json:"strategy"`
			} `json:"parts"`
			Fast0 struct {
				Value float64 `json:"value"`
				N     int     `json:"n"`
			} `json:"fast_0"`
		} `json:"arms"`
	}
	if err := json.Unmarshal([]byte(rep), &got); err != nil {
		t.Fatalf("%v\n%s", err, rep)
	}
	want := map[string]float64{"oneshot": 0, "sampling@2": 0, "refine-G@2": 0, "refine-GE@2": 1, "refine-GEP@2": 1, "backtrack@2": 1}
	seen := map[string]bool{}
	for _, a := range got.Arms {
		seen[a.Parts.Strategy] = true
		if w, ok := want[a.Parts.Strategy]; !ok || a.Fast0.N != 1 || a.Fast0.Value != w {
			t.Errorf("arm %s: fast_0 %.2f over %d task(s), want %.0f over 1", a.Parts.Strategy, a.Fast0.Value, a.Fast0.N, w)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("report has arms %v, want %d strategies", seen, len(want))
	}
	// Equal budgets: no arm asked for more than its two generations.
	if n := srv.Requests(); n > 2*len(want) {
		t.Errorf("the model was asked %d times; six arms of two generations ask at most 12", n)
	}

	plots := filepath.Join(dir, "plots")
	if out, errOut, code := run(t, env, "study", "report", id, "--plots", plots); code != 0 || !strings.Contains(out, "fast_p@N") {
		t.Errorf("study report --plots: exit %d %s\n%s", code, errOut, out)
	}
	for _, name := range []string{"fastp.png", "fastp.svg", "fastp_turns.png", "fastp_turns.svg"} {
		if fi, err := os.Stat(filepath.Join(plots, name)); err != nil || fi.Size() == 0 {
			t.Errorf("plot %s: %v", name, err)
		}
	}
	for _, format := range []string{"jsonl", "csv", "parquet"} {
		path := filepath.Join(dir, "attempts."+format)
		if _, errOut, code := run(t, env, "study", "export", id, "--format", format, "--out", path); code != 0 {
			t.Errorf("export %s: exit %d: %s", format, code, errOut)
		} else if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
			t.Errorf("export %s: %v", format, err)
		}
	}
}
