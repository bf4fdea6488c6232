package cli

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/plugins/strategies/oneshot"
	"github.com/kbplatform/kbplatform/sdk"
)

// TestMain lets the test binary serve built-in plugins, as the kbplatform binary does: the
// plugin manager re-executes os.Executable() with `plugin serve KIND/NAME`.
func TestMain(m *testing.M) {
	if os.Getenv("KBP_TEST_PLUGIN") == "crashing-strategy" {
		sdk.Serve(&crashingStrategy{Strategy: oneshot.New()})
		os.Exit(0)
	}
	if len(os.Args) > 2 && os.Args[1] == "plugin" && os.Args[2] == "serve" {
		os.Exit(Execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// crashingStrategy is oneshot, except that it dies in the middle of any softmax task, after its
// evaluation was stored.
type crashingStrategy struct{ *oneshot.Strategy }

func (c *crashingStrategy) Info() sdk.Info {
	i := c.Strategy.Info()
	i.Name = "crashing"
	return i
}

func (c *crashingStrategy) Run(ctx context.Context, req sdk.RunRequest, p sdk.Platform) (*sdk.RunResult, error) {
	if strings.Contains(req.Task.ID, "softmax") {
		msgs, _ := p.Prompt(ctx, sdk.VariantOneShot, "", nil)
		gen, err := p.Generate(ctx, sdk.GenerateRequest{Messages: msgs, N: 1})
		if err != nil {
			return nil, err
		}
		src, _ := p.Extract(ctx, gen.Completions[0].Text)
		if _, err := p.Evaluate(ctx, src, "before the crash"); err != nil {
			return nil, err
		}
		os.Exit(7)
	}
	return c.Strategy.Run(ctx, req, p)
}
