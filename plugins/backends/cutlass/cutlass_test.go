package cutlass

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

var update = flag.Bool("update", false, "rewrite the golden prompts")

// fakeCheckout makes a directory shaped like a CUTLASS checkout (the header the backend looks for).
func fakeCheckout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "include", "cutlass"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "include", "cutlass", "cutlass.h"), []byte("#pragma once\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func config(t *testing.T) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"cutlass_path": fakeCheckout(t)})
	return b
}

func TestConformance(t *testing.T) {
	plugintest.RunBackendConformance(t, New(), config(t), "```python\n"+plugintest.HonestCandidate("cutlass")+"```\n")
}

func TestPrompts(t *testing.T) {
	plugintest.RunPromptGoldens(t, New(), nil, "testdata/prompts", *update)
}

func TestRules(t *testing.T) {
	plugintest.RunRuleConformance(t, New(), nil, "cutlass", RuleFile)
}

func TestExamplesPassTheirOwnRules(t *testing.T) {
	sub, _ := fs.Sub(files, "prompts")
	plugintest.RunExampleChecks(t, New(), nil, sub)
}

func TestCutlassPath(t *testing.T) {
	ctx := context.Background()
	good := fakeCheckout(t)
	t.Setenv("CUTLASS_PATH", "")

	t.Run("a checkout gives include paths, the arch and CuTe's flags", func(t *testing.T) {
		b := New()
		if err := b.Configure(ctx, sdk.Configuration{Raw: json.RawMessage(`{"cutlass_path": "` + good + `"}`)}); err != nil {
			t.Fatal(err)
		}
		r, err := b.Recipe(ctx, plugintest.PromptHardware)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(r.IncludePaths, filepath.Join(good, "include")) || r.Env["TORCH_CUDA_ARCH_LIST"] != "9.0" ||
			!slices.Contains(r.CUDAFlags, "--expt-relaxed-constexpr") {
			t.Errorf("recipe %+v", r)
		}
	})
	t.Run("a path without the header is refused at Configure", func(t *testing.T) {
		err := New().Configure(ctx, sdk.Configuration{Raw: json.RawMessage(`{"cutlass_path": "` + t.TempDir() + `"}`)})
		if !errors.Is(err, sdk.ErrInvalidConfig) || !strings.Contains(err.Error(), "include/cutlass/cutlass.h") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("no path at all is reported when a build needs one", func(t *testing.T) {
		b := New()
		if err := b.Configure(ctx, sdk.Configuration{}); err != nil {
			t.Fatal(err)
		}
		_, err := b.Recipe(ctx, nil)
		if !errors.Is(err, ErrNoCutlass) || !strings.Contains(err.Error(), "cutlass_path") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("CUTLASS_PATH stands in for the setting", func(t *testing.T) {
		t.Setenv("CUTLASS_PATH", good)
		b := New()
		if err := b.Configure(ctx, sdk.Configuration{}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Recipe(ctx, nil); err != nil {
			t.Errorf("got %v", err)
		}
	})
	t.Run("the error crosses the plugin boundary", func(t *testing.T) {
		r := plugintest.Connect(t, New())
		if err := r.Configure(ctx, nil, nil); err != nil {
			t.Fatal(err)
		}
		_, err := r.Backend().Recipe(ctx, nil)
		if !errors.Is(err, sdk.ErrInvalidConfig) || !strings.Contains(err.Error(), "cutlass_path") {
			t.Errorf("got %v", err)
		}
	})
}
