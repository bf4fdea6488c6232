package cuda

import (
	"context"
	"flag"
	"io/fs"
	"testing"

	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

var update = flag.Bool("update", false, "rewrite the golden prompts")

func TestConformance(t *testing.T) {
	plugintest.RunBackendConformance(t, New(), nil, "```python\n"+plugintest.HonestCandidate("cuda")+"```\n")
}

func TestPrompts(t *testing.T) {
	plugintest.RunPromptGoldens(t, New(), nil, "testdata/prompts", *update)
}

func TestRules(t *testing.T) {
	plugintest.RunRuleConformance(t, New(), nil, "cuda", RuleFile)
}

// The recipe builds for the target's GPUs (the list itself: kernellang's TestCUDAArchList).
func TestRecipe(t *testing.T) {
	r, err := New().Recipe(context.Background(), plugintest.PromptHardware)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Env["TORCH_CUDA_ARCH_LIST"]; got != "9.0" {
		t.Errorf("TORCH_CUDA_ARCH_LIST = %q, want 9.0", got)
	}
}

func TestExamplesPassTheirOwnRules(t *testing.T) {
	sub, _ := fs.Sub(files, "prompts")
	plugintest.RunExampleChecks(t, New(), nil, sub)
}
