// Package openaitest serves OpenAI's chat completions API from an httptest server whose replies
// a test scripts, and counts what it was sent: tests of the openai plugin, the host's gateway
// and the command line talk to it through the real openai-go client.
package openaitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/plugins/models/internal/wirelog"
)

// Reply answers the n-th request (1-based) given its decoded body.
type Reply func(n int, body map[string]any, w http.ResponseWriter)

// Server is an OpenAI-compatible endpoint; its base URL is URL + "/v1".
type Server struct {
	*httptest.Server
	wirelog.Log
	reply Reply
}

// New starts a server closed at the end of the test.
func New(t testing.TB, reply Reply) *Server {
	s := &Server{reply: reply}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		n, body := s.Add(r, r.Header.Get("Authorization"))
		s.reply(n, body, w)
	}))
	t.Cleanup(s.Close)
	return s
}

// BaseURL is what a study's base_url setting should say.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Auth returns the i-th request's Authorization header.
func (s *Server) Auth(i int) string { return s.At(i).Credential }

// Completion writes a chat completion with one choice per text; extra fields go into each
// message (reasoning_content, say). Usage: 100 prompt tokens, 20 completion tokens per choice
// (5 of them reasoning).
func Completion(w http.ResponseWriter, extra map[string]any, texts ...string) {
	var choices []map[string]any
	for i, t := range texts {
		msg := map[string]any{"role": "assistant", "content": t}
		for k, v := range extra {
			msg[k] = v
		}
		choices = append(choices, map[string]any{"index": i, "finish_reason": "stop", "message": msg})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "c1", "object": "chat.completion", "created": 1, "model": "m-served",
		"choices": choices, "usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 20 * len(texts), "total_tokens": 100 + 20*len(texts),
			"completion_tokens_details": map[string]any{"reasoning_tokens": 5 * len(texts)}}})
}

// N is the number of completions a request body asks for.
func N(body map[string]any) int {
	if v, ok := body["n"].(float64); ok && v > 1 {
		return int(v)
	}
	return 1
}

// Error writes an OpenAI error reply.
func Error(w http.ResponseWriter, status int, code, param, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": code, "param": param}})
}

// RateLimited writes a 429 asking the client to wait d.
func RateLimited(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", fmt.Sprint(d.Seconds()))
	Error(w, http.StatusTooManyRequests, "rate_limit_exceeded", "", "slow down")
}
