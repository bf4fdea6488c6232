package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/plugins/models/anthropic/anthropictest"
	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

const testKey = "sk-ant-test-91f0-never-stored"

func configure(t *testing.T, s *anthropictest.Server, extra string) *Model {
	t.Helper()
	t.Setenv("KBP_TEST_KEY", testKey)
	m := New()
	cfg := fmt.Sprintf(`{"base_url": %q, "model": "claude-x", "api_key_env": "KBP_TEST_KEY"%s}`, s.URL, extra)
	if err := m.Configure(context.Background(), sdk.Configuration{Raw: json.RawMessage(cfg)}); err != nil {
		t.Fatal(err)
	}
	return m
}

var ask = sdk.GenerateRequest{Messages: []sdk.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "write ModelNew"}}, N: 1}

func TestConformance(t *testing.T) {
	s := anthropictest.New(t, func(n int, _ map[string]any, w http.ResponseWriter) {
		anthropictest.Message(w, "end_turn", anthropictest.Text(fmt.Sprintf("```python\nclass ModelNew: pass  # %d\n```", n)))
	})
	t.Setenv("KBP_TEST_KEY", testKey)
	plugintest.RunModelConformance(t, New(), json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "claude-x", "api_key_env": "KBP_TEST_KEY"}`, s.URL)))
}

func TestGenerate(t *testing.T) {
	ctx := context.Background()
	t.Run("success with thinking apart, n > 1 as several requests", func(t *testing.T) {
		s := anthropictest.New(t, func(n int, _ map[string]any, w http.ResponseWriter) {
			anthropictest.Message(w, "end_turn", anthropictest.Thinking("tile it"), anthropictest.Text(fmt.Sprintf("answer %d", n)))
		})
		m := configure(t, s, `, "thinking_budget": 2048, "top_p": 0.9`)
		temp := 1.0
		req := ask
		req.N = 2
		req.Params = sdk.SamplingParams{Temperature: &temp, MaxTokens: 4096, Stop: []string{"###"}}
		resp, err := m.Generate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Completions) != 2 || resp.Completions[1].Text != "answer 2" || resp.Completions[0].Reasoning != "tile it" {
			t.Fatalf("completions %+v", resp.Completions)
		}
		if u := resp.Usage; u.PromptTokens != 200 || u.CachedPromptTokens != 20 || u.CompletionTokens != 60 || u.ReasoningTokens != 24 {
			t.Errorf("usage %+v", u)
		}
		b := s.Body(0)
		if b["model"] != "claude-x" || b["max_tokens"] != 4096.0 || b["temperature"] != 1.0 || b["top_p"] != 0.9 {
			t.Errorf("body %v", b)
		}
		if th, _ := b["thinking"].(map[string]any); th["budget_tokens"] != 2048.0 {
			t.Errorf("thinking %v", b["thinking"])
		}
		if sys, _ := b["system"].([]any); len(sys) != 1 {
			t.Errorf("system %v", b["system"])
		}
		if s.Key(0) != testKey {
			t.Errorf("key header %q", s.Key(0))
		}
	})
	for _, tc := range []struct {
		name  string
		reply func(w http.ResponseWriter)
		want  error
	}{
		{"429 with Retry-After", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "3")
			anthropictest.Error(w, 429, "rate_limit_error", "slow down")
		}, sdk.ErrRateLimited},
		{"overloaded", func(w http.ResponseWriter) { anthropictest.Error(w, 529, "overloaded_error", "Overloaded") }, sdk.ErrUnavailable},
		{"500", func(w http.ResponseWriter) { anthropictest.Error(w, 500, "api_error", "boom") }, sdk.ErrUnavailable},
		{"invalid key", func(w http.ResponseWriter) { anthropictest.Error(w, 401, "authentication_error", "invalid x-api-key") }, sdk.ErrInvalidAPIKey},
		{"unknown model", func(w http.ResponseWriter) { anthropictest.Error(w, 404, "not_found_error", "model: claude-x") }, sdk.ErrUnknownModel},
		{"context length", func(w http.ResponseWriter) {
			anthropictest.Error(w, 400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
		}, sdk.ErrContextLength},
		{"refusal", func(w http.ResponseWriter) { anthropictest.Message(w, "refusal") }, sdk.ErrContentFiltered},
		{"empty", func(w http.ResponseWriter) { anthropictest.Message(w, "end_turn", anthropictest.Text(" ")) }, sdk.ErrEmptyReply},
		{"malformed JSON", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id": "msg_1", "content": [`)
		}, sdk.ErrMalformedReply},
		{"rejected parameter", func(w http.ResponseWriter) {
			anthropictest.Error(w, 400, "invalid_request_error", "top_p: Extra inputs are not permitted")
		}, sdk.ErrRejectedParameter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := anthropictest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) { tc.reply(w) })
			_, err := configure(t, s, `, "top_p": 0.5`).Generate(ctx, ask)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if s.Requests() != 1 {
				t.Errorf("%d requests: retrying is the host's", s.Requests())
			}
			if d, ok := sdk.RetryAfter(err); tc.want == sdk.ErrRateLimited && (!ok || d != 3*time.Second) {
				t.Errorf("retry after %v", d)
			}
			if tc.want == sdk.ErrRejectedParameter && !strings.Contains(err.Error(), `"top_p"`) {
				t.Errorf("the error should name top_p: %v", err)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("key in error")
			}
		})
	}
	t.Run("drop_unsupported", func(t *testing.T) {
		s := anthropictest.New(t, func(_ int, body map[string]any, w http.ResponseWriter) {
			if _, ok := body["top_p"]; ok {
				anthropictest.Error(w, 400, "invalid_request_error", "top_p: Extra inputs are not permitted")
				return
			}
			anthropictest.Message(w, "end_turn", anthropictest.Text("ok"))
		})
		if _, err := configure(t, s, `, "top_p": 0.5, "drop_unsupported": true`).Generate(ctx, ask); err != nil || s.Requests() != 2 {
			t.Fatalf("%v after %d requests", err, s.Requests())
		}
	})
	t.Run("timeout", func(t *testing.T) {
		s := anthropictest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
			time.Sleep(time.Second)
			anthropictest.Message(w, "end_turn", anthropictest.Text("late"))
		})
		if _, err := configure(t, s, `, "timeout": 0.2`).Generate(ctx, ask); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("missing key", func(t *testing.T) {
		s := anthropictest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
			anthropictest.Message(w, "end_turn", anthropictest.Text("x"))
		})
		m := configure(t, s, "")
		t.Setenv("KBP_TEST_KEY", "")
		if _, err := m.Generate(ctx, ask); !errors.Is(err, sdk.ErrMissingAPIKey) || s.Requests() != 0 {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("settings", func(t *testing.T) {
		for _, cfg := range []string{`{"model": "c", "thinking": 1}`, `{}`, `{"model": "c", "thinking_budget": 100}`} {
			if err := New().Configure(ctx, sdk.Configuration{Raw: json.RawMessage(cfg)}); !errors.Is(err, sdk.ErrInvalidConfig) {
				t.Errorf("%s: %v", cfg, err)
			}
		}
	})
}
