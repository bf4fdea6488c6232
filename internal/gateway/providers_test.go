package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/plugins/models/anthropic"
	"github.com/kbplatform/kbplatform/plugins/models/anthropic/anthropictest"
	"github.com/kbplatform/kbplatform/plugins/models/gemini"
	"github.com/kbplatform/kbplatform/plugins/models/gemini/geminitest"
	"github.com/kbplatform/kbplatform/plugins/models/openai"
	"github.com/kbplatform/kbplatform/plugins/models/openai/openaitest"
	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

// provider is one wire protocol: its plugin, and a server that rate-limits its first request
// (asking for a one-second wait) and answers the others.
type provider struct {
	name   string
	plugin func() sdk.Model
	// start returns the plugin's settings and the server's request count.
	start func(t *testing.T) (json.RawMessage, func() int)
	// tokens the server's usage reports per request: prompt and completion.
	prompt, completion int64
	served             string // the model name the server reports
}

const answer = "```python\nclass ModelNew: pass\n```"

var providers = []provider{
	{"openai", func() sdk.Model { return openai.New() }, func(t *testing.T) (json.RawMessage, func() int) {
		s := openaitest.New(t, func(n int, _ map[string]any, w http.ResponseWriter) {
			if n == 1 {
				openaitest.RateLimited(w, time.Second)
				return
			}
			openaitest.Completion(w, nil, answer)
		})
		return json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "m", "api_key_env": "KBP_TEST_KEY"}`, s.BaseURL())), s.Requests
	}, 100, 20, "m-served"},
	{"anthropic", func() sdk.Model { return anthropic.New() }, func(t *testing.T) (json.RawMessage, func() int) {
		s := anthropictest.New(t, func(n int, _ map[string]any, w http.ResponseWriter) {
			if n == 1 {
				anthropictest.RateLimited(w, time.Second)
				return
			}
			anthropictest.Message(w, "end_turn", anthropictest.Text(answer))
		})
		return json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "claude-x", "api_key_env": "KBP_TEST_KEY"}`, s.URL)), s.Requests
	}, 100, 30, "claude-served"},
	{"gemini", func() sdk.Model { return gemini.New() }, func(t *testing.T) (json.RawMessage, func() int) {
		s := geminitest.New(t, func(n int, _ map[string]any, w http.ResponseWriter) {
			if n == 1 {
				geminitest.RateLimited(w, time.Second)
				return
			}
			geminitest.Respond(w, geminitest.Stop("STOP", geminitest.Text(answer)))
		})
		return json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "gemini-x", "api_key_env": "KBP_TEST_KEY"}`, s.URL)), s.Requests
	}, 80, 55, "gemini-served"},
}

// Every wire protocol, through its real SDK client and plugin, gets the same host behaviour: a
// 429 is retried after the wait the server asked for, a repeated study sends nothing, the cost
// is summed from the price table, and the key is in no file of the database and no log line.
func TestEveryProvider(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			t.Setenv("KBP_TEST_KEY", testKey)
			dir := t.TempDir()
			st, err := store.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			cfg, requests := p.start(t)
			var logs bytes.Buffer
			prices := Prices{p.served: {Input: 2, Output: 10}}
			study := func() time.Duration {
				m := plugintest.Connect(t, p.plugin()).Model()
				if err := m.Configure(context.Background(), sdk.Configuration{Raw: cfg}); err != nil {
					t.Fatal(err)
				}
				g := New(m, Options{Name: p.name, Plugin: "model/" + p.name, Config: cfg, Store: st, Cacheable: true, Prices: prices,
					Retry: Retry{MaxTries: 3, Initial: 10 * time.Millisecond}, Log: func(s string) { logs.WriteString(s + "\n") }}, nil)
				start := time.Now()
				for _, task := range []string{"kbp/l1/relu", "kbp/l1/softmax"} {
					resp, err := g.Generate(context.Background(), Call{Study: "s", Task: task, Strategy: "strategy/oneshot"}, ask(task, 1))
					if err != nil {
						t.Fatal(err)
					}
					if got := resp.Completions[0].Text; got != answer {
						t.Fatalf("reply %q", got)
					}
				}
				return time.Since(start)
			}
			if el := study(); el < time.Second || requests() != 3 {
				t.Errorf("first study: %d requests in %s; want 3 (one rate-limited) and a wait of a second", requests(), el)
			}
			study()
			if requests() != 3 {
				t.Errorf("the repeated study sent %d requests", requests()-3)
			}
			calls, err := st.Calls("s")
			if err != nil {
				t.Fatal(err)
			}
			lines := Costs(calls)
			want := 2 * (float64(p.prompt)*2 + float64(p.completion)*10) / 1e6
			if l := lines[0]; len(lines) != 1 || l.Calls != 4 || l.Cached != 2 || l.PromptTokens != 2*p.prompt || l.CompletionTokens != 2*p.completion ||
				math.Abs(l.CostUSD-want) > 1e-12 || l.Unpriced != 0 {
				t.Errorf("costs %+v, want 4 calls, 2 cached, $%g", lines, want)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), "try 1 failed") || strings.Contains(logs.String(), testKey) {
				t.Errorf("logs:\n%s", logs.String())
			}
			_ = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
				if err != nil || info.IsDir() {
					return err
				}
				if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(testKey)) {
					t.Errorf("the key is in %s", path)
				}
				return nil
			})
		})
	}
}
