package cpp

import (
	"flag"
	"io/fs"
	"testing"

	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

var update = flag.Bool("update", false, "rewrite the golden prompts")

func TestConformance(t *testing.T) {
	plugintest.RunBackendConformance(t, New(), nil, plugintest.GoodReply)
}

func TestPrompts(t *testing.T) {
	plugintest.RunPromptGoldens(t, New(), nil, "testdata/prompts", *update)
}

func TestRules(t *testing.T) {
	plugintest.RunRuleConformance(t, New(), nil, "cpp", RuleFile)
}

func TestExamplesPassTheirOwnRules(t *testing.T) {
	sub, _ := fs.Sub(files, "prompts")
	plugintest.RunExampleChecks(t, New(), nil, sub)
}
