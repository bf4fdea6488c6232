package replay

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

func TestConformance(t *testing.T) {
	plugintest.RunModelConformance(t, New(), json.RawMessage(`{"source":"examples","backend":"cpp"}`))
}

func TestDirReplaysInOrderAndCycles(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "kbp__l1__relu.1.py"), []byte("first"), 0o644)
	os.WriteFile(filepath.Join(dir, "kbp__l1__relu.2.py"), []byte("second"), 0o644)
	os.WriteFile(filepath.Join(dir, "softmax.py"), []byte("soft"), 0o644)
	m := New()
	cfg, _ := json.Marshal(map[string]string{"source": "dir", "dir": dir})
	if err := m.Configure(context.Background(), sdk.Configuration{Raw: cfg}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	resp, err := m.Generate(ctx, sdk.GenerateRequest{N: 3, TaskID: "kbp/l1/relu"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range resp.Completions {
		got = append(got, strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(c.Text, "```python\n"), "```\n")))
	}
	if strings.Join(got, ",") != "first,second,first" {
		t.Errorf("order: %v", got)
	}
	if resp, err := m.Generate(ctx, sdk.GenerateRequest{N: 1, TaskID: "kernelbench/l1/softmax"}); err != nil || !strings.Contains(resp.Completions[0].Text, "soft") {
		t.Errorf("by last id part: %v", err)
	}
	if _, err := m.Generate(ctx, sdk.GenerateRequest{N: 1, TaskID: "kbp/l1/nothing"}); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
}

func TestKernelBenchRunLayout(t *testing.T) {
	dir := t.TempDir()
	level := filepath.Join(dir, "level1")
	if err := os.MkdirAll(level, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		"level_1_problem_19_sample_1_kernel.py": "relu sample 1",
		"level_1_problem_19_sample_0_kernel.py": "relu sample 0",
		"level_1_problem_2_sample_0_kernel.py":  "matmul sample 0",
		"eval_results.json":                     "{}",
	} {
		if err := os.WriteFile(filepath.Join(level, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := New()
	cfg, _ := json.Marshal(map[string]string{"source": "dir", "dir": dir})
	ctx := context.Background()
	if err := m.Configure(ctx, sdk.Configuration{Raw: cfg}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		task string
		n    int
		want []string
	}{
		{"kernelbench/l1/19_ReLU", 2, []string{"relu sample 0", "relu sample 1"}},
		{"kernelbench/l1/2_Standard_matrix_multiplication_", 1, []string{"matmul sample 0"}},
	} {
		t.Run(tc.task, func(t *testing.T) {
			resp, err := m.Generate(ctx, sdk.GenerateRequest{N: tc.n, TaskID: tc.task})
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range resp.Completions {
				if !strings.Contains(c.Text, tc.want[i]) {
					t.Errorf("completion %d: %q, want %q", i, c.Text, tc.want[i])
				}
			}
		})
	}
	if _, err := m.Generate(ctx, sdk.GenerateRequest{N: 1, TaskID: "kernelbench/l2/19_Conv"}); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("another level's problem 19: %v", err)
	}
}

func TestStudyAndPassedNeedTheStore(t *testing.T) {
	for _, cfg := range []string{`{"source": "examples", "study": "abc"}`, `{"source": "dir", "dir": ".", "passed": true}`} {
		if err := New().Configure(context.Background(), sdk.Configuration{Raw: json.RawMessage(cfg)}); !errors.Is(err, sdk.ErrInvalidConfig) {
			t.Errorf("%s: %v", cfg, err)
		}
	}
}
