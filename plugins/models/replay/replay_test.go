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
