package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// echoServer is one wire protocol whose server answers every request with a 401 that echoes the
// credential it was sent, as OpenAI's "Incorrect API key provided: ..." does.
type echoServer struct {
	name   string
	plugin func() sdk.Model
	// start starts the server and returns the plugin's settings for a key in the variable env.
	start func(t *testing.T, env string) json.RawMessage
	// shaped is a key in the provider's own format.
	shaped string
}

func echo(key string) string {
	return "Incorrect API key provided: " + key + ". You can find your API key in your account settings."
}

var echoServers = []echoServer{
	{"openai", func() sdk.Model { return openai.New() }, func(t *testing.T, env string) json.RawMessage {
		var s *openaitest.Server
		s = openaitest.New(t, func(n int, _ map[string]any, w http.ResponseWriter) {
			openaitest.Error(w, 401, "invalid_api_key", "", echo(strings.TrimPrefix(s.Auth(n-1), "Bearer ")))
		})
		return json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "m", "api_key_env": %q}`, s.BaseURL(), env))
	}, "sk-proj-Q1w2E3r4T5y6U7i8O9p0"},
	{"anthropic", func() sdk.Model { return anthropic.New() }, func(t *testing.T, env string) json.RawMessage {
		var s *anthropictest.Server
		s = anthropictest.New(t, func(n int, _ map[string]any, w http.ResponseWriter) {
			anthropictest.Error(w, 401, "authentication_error", echo(s.Key(n-1)))
		})
		return json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "claude-x", "api_key_env": %q}`, s.URL, env))
	}, "sk-ant-api03-Q1w2E3r4T5y6U7i8O9p0"},
	{"gemini", func() sdk.Model { return gemini.New() }, func(t *testing.T, env string) json.RawMessage {
		var s *geminitest.Server
		s = geminitest.New(t, func(n int, _ map[string]any, w http.ResponseWriter) {
			geminitest.Error(w, 401, "UNAUTHENTICATED", echo(s.Key(n-1)))
		})
		return json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "gemini-x", "api_key_env": %q}`, s.URL, env))
	}, "AIzaSyQ1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h"},
}

// A provider that echoes the key in an error body, through the real client of each wire
// protocol: the key is in neither the plugin's error (as it crosses the plugin boundary) nor the
// gateway's (returned to the strategy), its log lines or the store; the error is still an
// invalid key. Two keys: one under a name that does not look like a key's (only the settings
// say it is one), one in the provider's own format.
func TestEchoedKeyIsRedacted(t *testing.T) {
	ctx := context.Background()
	for _, srv := range echoServers {
		for _, key := range []struct{ env, value string }{
			{"KBP_ECHO_ACCESS", "kbp-echo-0c1d2e3f4a5b"},
			{"KBP_TEST_KEY", srv.shaped},
		} {
			t.Run(srv.name+"/"+key.env, func(t *testing.T) {
				t.Setenv(key.env, key.value)
				cfg := srv.start(t, key.env)
				check := func(what string, err error) {
					t.Helper()
					if !errors.Is(err, sdk.ErrInvalidAPIKey) {
						t.Errorf("%s: got %v, want an invalid key", what, err)
					}
					if err != nil && (strings.Contains(err.Error(), key.value) || !strings.Contains(err.Error(), "[redacted]")) {
						t.Errorf("%s: %q", what, err)
					}
				}
				m := plugintest.Connect(t, srv.plugin()).Model()
				if err := m.Configure(ctx, sdk.Configuration{Raw: cfg}); err != nil {
					t.Fatal(err)
				}
				_, err := m.Generate(ctx, ask("relu", 1))
				check("the plugin's error", err)

				dir := t.TempDir()
				st, err := store.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				var logs bytes.Buffer
				g := New(m, Options{Name: srv.name, Plugin: "model/" + srv.name, Config: cfg, Store: st, Cacheable: true,
					Retry: Retry{MaxTries: 2, Initial: 10 * time.Millisecond}, Log: func(s string) { logs.WriteString(s + "\n") }}, nil)
				_, err = g.Generate(ctx, call, ask("relu", 1))
				check("the gateway's error", err)
				calls, _ := st.Calls(call.Study)
				if len(calls) != 1 || calls[0].Failure != sdk.FailureInvalidKey || !strings.Contains(calls[0].Error, "[redacted]") {
					t.Errorf("records %+v", calls)
				}
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
				if logs.Len() == 0 || strings.Contains(logs.String(), key.value) {
					t.Errorf("logs:\n%s", logs.String())
				}
				_ = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
					if err != nil || info.IsDir() {
						return err
					}
					if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(key.value)) {
						t.Errorf("the key is in %s", path)
					}
					return nil
				})
			})
		}
	}
}
