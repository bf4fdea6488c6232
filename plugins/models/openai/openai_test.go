package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/plugins/models/openai/openaitest"
	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

const testKey = "sk-test-6f1d2c9a-never-stored"

func configure(t *testing.T, s *openaitest.Server, extra string) *Model {
	t.Helper()
	t.Setenv("KBP_TEST_KEY", testKey)
	m := New()
	cfg := fmt.Sprintf(`{"base_url": %q, "model": "m", "api_key_env": "KBP_TEST_KEY"%s}`, s.BaseURL(), extra)
	if err := m.Configure(context.Background(), sdk.Configuration{Raw: json.RawMessage(cfg)}); err != nil {
		t.Fatal(err)
	}
	return m
}

var ask = sdk.GenerateRequest{Messages: []sdk.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "write ModelNew"}}, N: 1}

func TestConformance(t *testing.T) {
	s := openaitest.New(t, func(_ int, body map[string]any, w http.ResponseWriter) {
		n := 1
		if v, ok := body["n"].(float64); ok {
			n = int(v)
		}
		texts := make([]string, n)
		for i := range texts {
			texts[i] = fmt.Sprintf("```python\nclass ModelNew: pass  # %d\n```", i)
		}
		openaitest.Completion(w, nil, texts...)
	})
	t.Setenv("KBP_TEST_KEY", testKey)
	plugintest.RunModelConformance(t, New(), json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "m", "api_key_env": "KBP_TEST_KEY"}`, s.BaseURL())))
}

func TestGenerate(t *testing.T) {
	ctx := context.Background()
	t.Run("success sends the settings and the key", func(t *testing.T) {
		s := openaitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) { openaitest.Completion(w, nil, "answer") })
		m := configure(t, s, `, "top_p": 0.5, "seed": 7, "reasoning_effort": "low", "extra_body": {"top_k": 20}`)
		temp := 0.0
		req := ask
		req.Params = sdk.SamplingParams{Temperature: &temp, MaxTokens: 300, Stop: []string{"###"}}
		resp, err := m.Generate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Completions[0].Text; got != "answer" {
			t.Errorf("text %q", got)
		}
		if resp.Usage.PromptTokens != 100 || resp.Usage.CompletionTokens != 20 || resp.Usage.ReasoningTokens != 5 || resp.Model != "m-served" {
			t.Errorf("usage %+v model %q", resp.Usage, resp.Model)
		}
		b := s.Body(0)
		want := map[string]any{"model": "m", "temperature": 0.0, "top_p": 0.5, "seed": 7.0, "max_tokens": 300.0, "reasoning_effort": "low", "top_k": 20.0}
		for k, v := range want {
			if b[k] != v {
				t.Errorf("body %s = %v, want %v", k, b[k], v)
			}
		}
		if msgs, _ := b["messages"].([]any); len(msgs) != 2 {
			t.Errorf("messages %v", b["messages"])
		}
		if s.Auth(0) != "Bearer "+testKey {
			t.Errorf("authorization %q", s.Auth(0))
		}
	})
	t.Run("n > 1 in one request, split when n is capped", func(t *testing.T) {
		s := openaitest.New(t, func(_ int, body map[string]any, w http.ResponseWriter) {
			n, _ := body["n"].(float64)
			texts := []string{"a"}
			if n == 2 {
				texts = []string{"a", "b"}
			}
			openaitest.Completion(w, nil, texts...)
		})
		req := ask
		req.N = 2
		resp, err := configure(t, s, "").Generate(ctx, req)
		if err != nil || len(resp.Completions) != 2 || s.Requests() != 1 {
			t.Fatalf("n=2: %v, %d requests", err, s.Requests())
		}
		req.N = 3
		resp, err = configure(t, s, `, "n": 2`).Generate(ctx, req)
		if err != nil || len(resp.Completions) != 3 || s.Requests() != 3 {
			t.Fatalf("n=3 capped at 2: %v, %d requests", err, s.Requests())
		}
		if resp.Usage.PromptTokens != 200 {
			t.Errorf("usage is summed over requests: %+v", resp.Usage)
		}
	})
	t.Run("reasoning is kept apart from the answer", func(t *testing.T) {
		s := openaitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
			openaitest.Completion(w, map[string]any{"reasoning_content": "think about tiles"}, "```python\nclass ModelNew: pass\n```")
		})
		resp, err := configure(t, s, "").Generate(ctx, ask)
		if err != nil {
			t.Fatal(err)
		}
		if c := resp.Completions[0]; c.Reasoning != "think about tiles" || strings.Contains(c.Text, "tiles") {
			t.Errorf("completion %+v", c)
		}
	})
	failures := []struct {
		name  string
		reply func(w http.ResponseWriter)
		want  error
		check func(t *testing.T, err error)
	}{
		{"429 with Retry-After", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "7")
			openaitest.Error(w, 429, "rate_limit_exceeded", "", "slow down")
		}, sdk.ErrRateLimited, func(t *testing.T, err error) {
			if d, ok := sdk.RetryAfter(err); !ok || d != 7*time.Second {
				t.Errorf("retry after %v %v", d, ok)
			}
		}},
		{"500", func(w http.ResponseWriter) { openaitest.Error(w, 500, "", "", "boom") }, sdk.ErrUnavailable, nil},
		{"401", func(w http.ResponseWriter) { openaitest.Error(w, 401, "invalid_api_key", "", "Incorrect API key") }, sdk.ErrInvalidAPIKey, nil},
		{"unknown model", func(w http.ResponseWriter) {
			openaitest.Error(w, 404, "model_not_found", "", "The model `m` does not exist")
		}, sdk.ErrUnknownModel, nil},
		{"context length", func(w http.ResponseWriter) {
			openaitest.Error(w, 400, "context_length_exceeded", "messages", "This model's maximum context length is 8192 tokens")
		}, sdk.ErrContextLength, nil},
		{"content filter", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"content_filter","message":{"role":"assistant","content":""}}]}`)
		}, sdk.ErrContentFiltered, nil},
		{"empty reply", func(w http.ResponseWriter) { openaitest.Completion(w, nil, "  ") }, sdk.ErrEmptyReply, nil},
		{"no choices", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"x","object":"chat.completion","model":"m","choices":[]}`)
		}, sdk.ErrEmptyReply, nil},
		{"malformed JSON", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id": "x", "choices": [`)
		}, sdk.ErrMalformedReply, nil},
		{"rejected parameter", func(w http.ResponseWriter) {
			openaitest.Error(w, 400, "unsupported_parameter", "temperature", "Unsupported parameter: 'temperature' is not supported with this model.")
		}, sdk.ErrRejectedParameter, func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), `"temperature"`) || !strings.Contains(err.Error(), "drop_unsupported") {
				t.Errorf("the error should name the parameter and the way out: %v", err)
			}
		}},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			s := openaitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) { tc.reply(w) })
			temp := 0.5
			req := ask
			req.Params.Temperature = &temp
			_, err := configure(t, s, "").Generate(ctx, req)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if s.Requests() != 1 {
				t.Errorf("%d requests: the plugin must not retry (the host does)", s.Requests())
			}
			if tc.check != nil {
				tc.check(t, err)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("the key is in the error: %v", err)
			}
		})
	}
	t.Run("timeout", func(t *testing.T) {
		s := openaitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
			time.Sleep(2 * time.Second)
			openaitest.Completion(w, nil, "late")
		})
		start := time.Now()
		_, err := configure(t, s, `, "timeout": "300ms"`).Generate(ctx, ask)
		if !errors.Is(err, context.DeadlineExceeded) || !sdk.Transient(err) {
			t.Fatalf("got %v, want a transient deadline error", err)
		}
		if time.Since(start) > 1500*time.Millisecond {
			t.Errorf("the timeout setting did not bound the request: %s", time.Since(start))
		}
	})
	t.Run("drop_unsupported retries without the parameter", func(t *testing.T) {
		s := openaitest.New(t, func(_ int, body map[string]any, w http.ResponseWriter) {
			if _, ok := body["temperature"]; ok {
				openaitest.Error(w, 400, "unsupported_parameter", "temperature", "Unsupported parameter: 'temperature'")
				return
			}
			openaitest.Completion(w, nil, "ok")
		})
		m := configure(t, s, `, "drop_unsupported": true`)
		temp := 0.0
		req := ask
		req.Params.Temperature = &temp
		if _, err := m.Generate(ctx, req); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Generate(ctx, req); err != nil {
			t.Fatal(err)
		}
		if s.Requests() != 3 {
			t.Errorf("%d requests, want 3 (one rejected, then none carries temperature)", s.Requests())
		}
	})
	t.Run("missing key", func(t *testing.T) {
		s := openaitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) { openaitest.Completion(w, nil, "x") })
		m := configure(t, s, "")
		t.Setenv("KBP_TEST_KEY", "")
		if _, err := m.Generate(ctx, ask); !errors.Is(err, sdk.ErrMissingAPIKey) || s.Requests() != 0 {
			t.Fatalf("got %v after %d requests", err, s.Requests())
		}
	})
}

func TestSettings(t *testing.T) {
	for _, tc := range []struct{ name, cfg string }{
		{"unknown key", `{"model": "m", "temprature": 0}`},
		{"no model", `{"base_url": "http://x/v1"}`},
		{"bad url", `{"model": "m", "base_url": "localhost:8000"}`},
		{"bad timeout", `{"model": "m", "timeout": "soon"}`},
		{"extra_body overriding the model", `{"model": "m", "extra_body": {"model": "other"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := New().Configure(context.Background(), sdk.Configuration{Raw: json.RawMessage(tc.cfg)})
			if !errors.Is(err, sdk.ErrInvalidConfig) {
				t.Errorf("got %v, want ErrInvalidConfig", err)
			}
		})
	}
}
