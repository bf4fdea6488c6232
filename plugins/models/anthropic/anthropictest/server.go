// Package anthropictest serves Anthropic's Messages API from an httptest server whose replies a
// test scripts, and counts what it was sent.
package anthropictest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/plugins/models/internal/wirelog"
)

// Reply answers the n-th request (1-based) given its decoded body.
type Reply func(n int, body map[string]any, w http.ResponseWriter)

// Server is a Messages API endpoint; its base URL is URL.
type Server struct {
	*httptest.Server
	wirelog.Log
}

// New starts a server closed at the end of the test.
func New(t testing.TB, reply Reply) *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" {
			http.NotFound(w, r)
			return
		}
		// The key arrives as x-api-key or as a bearer token, depending on the SDK's version.
		n, body := s.Add(r, r.Header.Get("X-Api-Key")+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		reply(n, body, w)
	}))
	t.Cleanup(s.Close)
	return s
}

// Key returns the key the i-th request carried.
func (s *Server) Key(i int) string { return s.At(i).Credential }

// Message writes a message of content blocks. Usage: 90 input tokens and 10 read from the
// prompt cache, 30 output tokens of which 12 thinking.
func Message(w http.ResponseWriter, stop string, blocks ...map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-served",
		"content": blocks, "stop_reason": stop, "usage": map[string]any{"input_tokens": 90, "cache_read_input_tokens": 10, "output_tokens": 30,
			"output_tokens_details": map[string]any{"thinking_tokens": 12}}})
}

// Text is a text block.
func Text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

// Thinking is a thinking block.
func Thinking(s string) map[string]any {
	return map[string]any{"type": "thinking", "thinking": s, "signature": "sig"}
}

// Error writes an API error.
func Error(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

// RateLimited writes a 429 asking the client to wait d.
func RateLimited(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", fmt.Sprint(d.Seconds()))
	Error(w, http.StatusTooManyRequests, "rate_limit_error", "slow down")
}
