package cuda

import (
	"context"
	"flag"
	"io/fs"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
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

func TestRecipe(t *testing.T) {
	cases := []struct {
		name string
		hw   *sdk.Hardware
		want string
	}{
		{"no hardware", nil, ""},
		{"cpu only", &sdk.Hardware{Devices: []sdk.Device{{Name: "cpu", Kind: "cpu"}}}, ""},
		{"one H200", plugintest.PromptHardware, "9.0"},
		{"two kinds of GPU", &sdk.Hardware{Devices: []sdk.Device{{Kind: "cuda", ComputeCapability: "9.0"},
			{Kind: "cuda", ComputeCapability: "8.0"}, {Kind: "cuda", ComputeCapability: "9.0"}}}, "8.0;9.0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := New().Recipe(context.Background(), c.hw)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Env["TORCH_CUDA_ARCH_LIST"]; got != c.want {
				t.Errorf("TORCH_CUDA_ARCH_LIST = %q, want %q", got, c.want)
			}
		})
	}
}

func TestExamplesPassTheirOwnRules(t *testing.T) {
	sub, _ := fs.Sub(files, "prompts")
	plugintest.RunExampleChecks(t, New(), nil, sub)
}
