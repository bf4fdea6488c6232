package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/plugins/models/gemini/geminitest"
	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

const testKey = "AIza-test-4d2e-never-stored"

func configure(t *testing.T, s *geminitest.Server, extra string) *Model {
	t.Helper()
	t.Setenv("KBP_TEST_KEY", testKey)
	m := New()
	cfg := fmt.Sprintf(`{"base_url": %q, "model": "gemini-x", "api_key_env": "KBP_TEST_KEY"%s}`, s.URL, extra)
	if err := m.Configure(context.Background(), sdk.Configuration{Raw: json.RawMessage(cfg)}); err != nil {
		t.Fatal(err)
	}
	return m
}

var ask = sdk.GenerateRequest{Messages: []sdk.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "write ModelNew"}}, N: 1}

func TestConformance(t *testing.T) {
	s := geminitest.New(t, func(_ int, body map[string]any, w http.ResponseWriter) {
		n := 1
		if gc, _ := body["generationConfig"].(map[string]any); gc["candidateCount"] != nil {
			n = int(gc["candidateCount"].(float64))
		}
		var cs []geminitest.Candidate
		for i := range n {
			cs = append(cs, geminitest.Stop("STOP", geminitest.Text(fmt.Sprintf("```python\nclass ModelNew: pass  # %d\n```", i))))
		}
		geminitest.Respond(w, cs...)
	})
	t.Setenv("KBP_TEST_KEY", testKey)
	plugintest.RunModelConformance(t, New(), json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "gemini-x", "api_key_env": "KBP_TEST_KEY"}`, s.URL)))
}

func TestGenerate(t *testing.T) {
	ctx := context.Background()
	t.Run("success: thoughts apart, n > 1 as candidates, thinking budget", func(t *testing.T) {
		s := geminitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
			geminitest.Respond(w, geminitest.Stop("STOP", geminitest.Thought("plan the tiles"), geminitest.Text("answer A")),
				geminitest.Stop("STOP", geminitest.Text("answer B")))
		})
		m := configure(t, s, `, "thinking_budget": 1024, "seed": 3`)
		temp := 0.0
		req := ask
		req.N = 2
		req.Params = sdk.SamplingParams{Temperature: &temp, MaxTokens: 2048}
		resp, err := m.Generate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Completions) != 2 || resp.Completions[0].Text != "answer A" || resp.Completions[0].Reasoning != "plan the tiles" || resp.Completions[1].Text != "answer B" {
			t.Fatalf("completions %+v", resp.Completions)
		}
		if u := resp.Usage; u.PromptTokens != 80 || u.CompletionTokens != 55 || u.ReasoningTokens != 15 || resp.Model != "gemini-served" {
			t.Errorf("usage %+v, model %q", u, resp.Model)
		}
		if s.Requests() != 1 || !strings.Contains(s.Path(0), "models/gemini-x:generateContent") || s.Key(0) != testKey {
			t.Errorf("request %s key %q", s.Path(0), s.Key(0))
		}
		gc, _ := s.Body(0)["generationConfig"].(map[string]any)
		tc, _ := gc["thinkingConfig"].(map[string]any)
		if gc["candidateCount"] != 2.0 || gc["temperature"] != 0.0 || gc["maxOutputTokens"] != 2048.0 || gc["seed"] != 3.0 || tc["thinkingBudget"] != 1024.0 {
			t.Errorf("generationConfig %v", gc)
		}
		if s.Body(0)["systemInstruction"] == nil {
			t.Errorf("no system instruction: %v", s.Body(0))
		}
	})
	for _, tc := range []struct {
		name  string
		reply func(w http.ResponseWriter)
		want  error
	}{
		{"429 with RetryInfo", func(w http.ResponseWriter) {
			geminitest.Error(w, 429, "RESOURCE_EXHAUSTED", "quota per minute", map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "4s"})
		}, sdk.ErrRateLimited},
		{"500", func(w http.ResponseWriter) { geminitest.Error(w, 500, "INTERNAL", "boom") }, sdk.ErrUnavailable},
		{"invalid key", func(w http.ResponseWriter) {
			geminitest.Error(w, 400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
		}, sdk.ErrInvalidAPIKey},
		{"unknown model", func(w http.ResponseWriter) {
			geminitest.Error(w, 404, "NOT_FOUND", "models/gemini-x is not found for API version v1beta")
		}, sdk.ErrUnknownModel},
		{"context length", func(w http.ResponseWriter) {
			geminitest.Error(w, 400, "INVALID_ARGUMENT", "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).")
		}, sdk.ErrContextLength},
		{"safety", func(w http.ResponseWriter) { geminitest.Respond(w, geminitest.Stop("SAFETY")) }, sdk.ErrContentFiltered},
		{"blocked prompt", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}`)
		}, sdk.ErrContentFiltered},
		{"empty", func(w http.ResponseWriter) { geminitest.Respond(w, geminitest.Stop("STOP", geminitest.Text(""))) }, sdk.ErrEmptyReply},
		{"malformed JSON", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"candidates": [`)
		}, sdk.ErrMalformedReply},
		{"rejected parameter", func(w http.ResponseWriter) {
			geminitest.Error(w, 400, "INVALID_ARGUMENT", `Invalid JSON payload received. Unknown name "seed" at 'generation_config': Cannot find field.`)
		}, sdk.ErrRejectedParameter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := geminitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) { tc.reply(w) })
			_, err := configure(t, s, `, "seed": 1`).Generate(ctx, ask)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if s.Requests() != 1 {
				t.Errorf("%d requests: retrying is the host's", s.Requests())
			}
			if d, ok := sdk.RetryAfter(err); tc.want == sdk.ErrRateLimited && (!ok || d != 4*time.Second) {
				t.Errorf("retry after %v", d)
			}
			if tc.want == sdk.ErrRejectedParameter && !strings.Contains(err.Error(), `"seed"`) {
				t.Errorf("the error should name seed: %v", err)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("key in error")
			}
		})
	}
	t.Run("drop_unsupported", func(t *testing.T) {
		s := geminitest.New(t, func(_ int, body map[string]any, w http.ResponseWriter) {
			if gc, _ := body["generationConfig"].(map[string]any); gc["seed"] != nil {
				geminitest.Error(w, 400, "INVALID_ARGUMENT", `Invalid JSON payload received. Unknown name "seed"`)
				return
			}
			geminitest.Respond(w, geminitest.Stop("STOP", geminitest.Text("ok")))
		})
		if _, err := configure(t, s, `, "seed": 1, "drop_unsupported": true`).Generate(ctx, ask); err != nil || s.Requests() != 2 {
			t.Fatalf("%v after %d requests", err, s.Requests())
		}
	})
	t.Run("timeout", func(t *testing.T) {
		s := geminitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
			time.Sleep(time.Second)
			geminitest.Respond(w, geminitest.Stop("STOP", geminitest.Text("late")))
		})
		if _, err := configure(t, s, `, "timeout": "200ms"`).Generate(ctx, ask); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("vertex in express mode", func(t *testing.T) {
		s := geminitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
			geminitest.Respond(w, geminitest.Stop("STOP", geminitest.Text("ok")))
		})
		m := configure(t, s, `, "backend": "vertex", "project": "p", "location": "us-central1"`)
		if _, err := m.Generate(ctx, ask); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(s.Path(0), "publishers/google/models/gemini-x:generateContent") || s.Key(0) != testKey {
			t.Errorf("path %s, key %q", s.Path(0), s.Key(0))
		}
	})
	t.Run("missing key", func(t *testing.T) {
		s := geminitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) { geminitest.Respond(w) })
		m := configure(t, s, "")
		t.Setenv("KBP_TEST_KEY", "")
		if _, err := m.Generate(ctx, ask); !errors.Is(err, sdk.ErrMissingAPIKey) || s.Requests() != 0 {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("settings", func(t *testing.T) {
		for _, cfg := range []string{`{"model": "g", "thinking": 1}`, `{"model": "g", "backend": "vertex"}`, `{"model": "g", "backend": "aws"}`} {
			if err := New().Configure(ctx, sdk.Configuration{Raw: json.RawMessage(cfg)}); !errors.Is(err, sdk.ErrInvalidConfig) {
				t.Errorf("%s: %v", cfg, err)
			}
		}
	})
}
