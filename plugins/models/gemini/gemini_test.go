package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

const testKey = "AIza-test-4d2e-never-stored"

// server speaks the Gemini API's generateContent; reply scripts each answer.
type server struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
	paths  []string
	keys   []string
}

func newServer(t *testing.T, reply func(n int, body map[string]any, w http.ResponseWriter)) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, ":generateContent") {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		s.paths = append(s.paths, r.URL.Path)
		s.keys = append(s.keys, r.Header.Get("X-Goog-Api-Key")+r.URL.Query().Get("key"))
		n := len(s.bodies)
		s.mu.Unlock()
		reply(n, body, w)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

type cand struct {
	finish string
	parts  []map[string]any
}

func respond(w http.ResponseWriter, cands ...cand) {
	var cs []map[string]any
	for i, c := range cands {
		cs = append(cs, map[string]any{"index": i, "finishReason": c.finish, "content": map[string]any{"role": "model", "parts": c.parts}})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"candidates": cs, "modelVersion": "gemini-served",
		"usageMetadata": map[string]any{"promptTokenCount": 80, "candidatesTokenCount": 40, "thoughtsTokenCount": 15, "totalTokenCount": 135}})
}

func textPart(s string) map[string]any { return map[string]any{"text": s} }

func apiError(w http.ResponseWriter, code int, status, msg string, details ...map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "status": status, "message": msg, "details": details}})
}

func configure(t *testing.T, s *server, extra string) *Model {
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
	s := newServer(t, func(_ int, body map[string]any, w http.ResponseWriter) {
		n := 1
		if gc, _ := body["generationConfig"].(map[string]any); gc["candidateCount"] != nil {
			n = int(gc["candidateCount"].(float64))
		}
		var cs []cand
		for i := range n {
			cs = append(cs, cand{"STOP", []map[string]any{textPart(fmt.Sprintf("```python\nclass ModelNew: pass  # %d\n```", i))}})
		}
		respond(w, cs...)
	})
	t.Setenv("KBP_TEST_KEY", testKey)
	plugintest.RunModelConformance(t, New(), json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "gemini-x", "api_key_env": "KBP_TEST_KEY"}`, s.URL)))
}

func TestGenerate(t *testing.T) {
	ctx := context.Background()
	t.Run("success: thoughts apart, n > 1 as candidates, thinking budget", func(t *testing.T) {
		s := newServer(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
			respond(w, cand{"STOP", []map[string]any{{"text": "plan the tiles", "thought": true}, textPart("answer A")}},
				cand{"STOP", []map[string]any{textPart("answer B")}})
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
		if s.requests() != 1 || !strings.Contains(s.paths[0], "models/gemini-x:generateContent") || s.keys[0] != testKey {
			t.Errorf("request %s key %q", s.paths[0], s.keys[0])
		}
		gc, _ := s.bodies[0]["generationConfig"].(map[string]any)
		tc, _ := gc["thinkingConfig"].(map[string]any)
		if gc["candidateCount"] != 2.0 || gc["temperature"] != 0.0 || gc["maxOutputTokens"] != 2048.0 || gc["seed"] != 3.0 || tc["thinkingBudget"] != 1024.0 {
			t.Errorf("generationConfig %v", gc)
		}
		if s.bodies[0]["systemInstruction"] == nil {
			t.Errorf("no system instruction: %v", s.bodies[0])
		}
	})
	for _, tc := range []struct {
		name  string
		reply func(w http.ResponseWriter)
		want  error
	}{
		{"429 with RetryInfo", func(w http.ResponseWriter) {
			apiError(w, 429, "RESOURCE_EXHAUSTED", "quota per minute", map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "4s"})
		}, sdk.ErrRateLimited},
		{"500", func(w http.ResponseWriter) { apiError(w, 500, "INTERNAL", "boom") }, sdk.ErrUnavailable},
		{"invalid key", func(w http.ResponseWriter) {
			apiError(w, 400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
		}, sdk.ErrInvalidAPIKey},
		{"unknown model", func(w http.ResponseWriter) {
			apiError(w, 404, "NOT_FOUND", "models/gemini-x is not found for API version v1beta")
		}, sdk.ErrUnknownModel},
		{"context length", func(w http.ResponseWriter) {
			apiError(w, 400, "INVALID_ARGUMENT", "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).")
		}, sdk.ErrContextLength},
		{"safety", func(w http.ResponseWriter) { respond(w, cand{"SAFETY", nil}) }, sdk.ErrContentFiltered},
		{"blocked prompt", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}`)
		}, sdk.ErrContentFiltered},
		{"empty", func(w http.ResponseWriter) { respond(w, cand{"STOP", []map[string]any{textPart("")}}) }, sdk.ErrEmptyReply},
		{"malformed JSON", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"candidates": [`)
		}, sdk.ErrMalformedReply},
		{"rejected parameter", func(w http.ResponseWriter) {
			apiError(w, 400, "INVALID_ARGUMENT", `Invalid JSON payload received. Unknown name "seed" at 'generation_config': Cannot find field.`)
		}, sdk.ErrRejectedParameter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, func(_ int, _ map[string]any, w http.ResponseWriter) { tc.reply(w) })
			_, err := configure(t, s, `, "seed": 1`).Generate(ctx, ask)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if s.requests() != 1 {
				t.Errorf("%d requests: retrying is the host's", s.requests())
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
		s := newServer(t, func(_ int, body map[string]any, w http.ResponseWriter) {
			if gc, _ := body["generationConfig"].(map[string]any); gc["seed"] != nil {
				apiError(w, 400, "INVALID_ARGUMENT", `Invalid JSON payload received. Unknown name "seed"`)
				return
			}
			respond(w, cand{"STOP", []map[string]any{textPart("ok")}})
		})
		if _, err := configure(t, s, `, "seed": 1, "drop_unsupported": true`).Generate(ctx, ask); err != nil || s.requests() != 2 {
			t.Fatalf("%v after %d requests", err, s.requests())
		}
	})
	t.Run("timeout", func(t *testing.T) {
		s := newServer(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
			time.Sleep(time.Second)
			respond(w, cand{"STOP", []map[string]any{textPart("late")}})
		})
		if _, err := configure(t, s, `, "timeout": "200ms"`).Generate(ctx, ask); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("vertex in express mode", func(t *testing.T) {
		s := newServer(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
			respond(w, cand{"STOP", []map[string]any{textPart("ok")}})
		})
		m := configure(t, s, `, "backend": "vertex", "project": "p", "location": "us-central1"`)
		if _, err := m.Generate(ctx, ask); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(s.paths[0], "publishers/google/models/gemini-x:generateContent") || s.keys[0] != testKey {
			t.Errorf("path %s, key %q", s.paths[0], s.keys[0])
		}
	})
	t.Run("missing key", func(t *testing.T) {
		s := newServer(t, func(_ int, _ map[string]any, w http.ResponseWriter) { respond(w) })
		m := configure(t, s, "")
		t.Setenv("KBP_TEST_KEY", "")
		if _, err := m.Generate(ctx, ask); !errors.Is(err, sdk.ErrMissingAPIKey) || s.requests() != 0 {
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
