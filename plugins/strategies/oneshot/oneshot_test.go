package oneshot

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

func TestConformance(t *testing.T) {
	plugintest.RunStrategyConformance(t, New(), nil)
}

func TestChainOfThought(t *testing.T) {
	for _, c := range []struct {
		settings, variant string
	}{
		{`{}`, sdk.VariantOneShot},
		{`{"chain_of_thought": true}`, sdk.VariantChainOfThought},
		{`{"variant": "few-shot"}`, sdk.VariantFewShot},
		{`{"variant": "few-shot", "chain_of_thought": true}`, ""},
	} {
		s := New()
		err := s.Configure(context.Background(), sdk.Configuration{Raw: json.RawMessage(c.settings)})
		if c.variant == "" {
			if !errors.Is(err, sdk.ErrInvalidConfig) {
				t.Errorf("%s: %v, want an invalid config", c.settings, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.settings, err)
		}
		fp := &plugintest.FakePlatform{Replies: []string{plugintest.GoodReply}}
		if _, err := s.Run(context.Background(), sdk.RunRequest{Task: plugintest.SampleTask}, fp); err != nil {
			t.Fatal(err)
		}
		if a := fp.Attempts[0]; len(a.Prompt) != 1 || !strings.HasPrefix(a.Prompt[0].Content, "prompt "+c.variant+"\n") {
			t.Errorf("%s: recorded prompt %+v", c.settings, a.Prompt)
		}
	}
}
