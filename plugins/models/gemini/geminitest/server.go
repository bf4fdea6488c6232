// Package geminitest serves the Gemini API's generateContent from an httptest server whose
// replies a test scripts, and counts what it was sent.
package geminitest

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

// Server is a generateContent endpoint; its base URL is URL.
type Server struct {
	*httptest.Server
	wirelog.Log
}

// New starts a server closed at the end of the test.
func New(t testing.TB, reply Reply) *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, ":generateContent") {
			http.NotFound(w, r)
			return
		}
		n, body := s.Add(r, r.Header.Get("X-Goog-Api-Key")+r.URL.Query().Get("key"))
		reply(n, body, w)
	}))
	t.Cleanup(s.Close)
	return s
}

// Path returns the i-th request's URL path.
func (s *Server) Path(i int) string { return s.At(i).Path }

// Key returns the key the i-th request carried.
func (s *Server) Key(i int) string { return s.At(i).Credential }

// Candidate is one candidate of a reply.
type Candidate struct {
	Finish string
	Parts  []map[string]any
}

// Stop is a candidate that finished for the reason given, with these parts.
func Stop(finish string, parts ...map[string]any) Candidate {
	return Candidate{Finish: finish, Parts: parts}
}

// Respond writes a GenerateContentResponse. Usage: 80 prompt tokens, 40 candidate tokens and 15
// thought tokens.
func Respond(w http.ResponseWriter, cands ...Candidate) {
	var cs []map[string]any
	for i, c := range cands {
		cs = append(cs, map[string]any{"index": i, "finishReason": c.Finish, "content": map[string]any{"role": "model", "parts": c.Parts}})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"candidates": cs, "modelVersion": "gemini-served",
		"usageMetadata": map[string]any{"promptTokenCount": 80, "candidatesTokenCount": 40, "thoughtsTokenCount": 15, "totalTokenCount": 135}})
}

// Text is a text part.
func Text(s string) map[string]any { return map[string]any{"text": s} }

// Thought is a thought part.
func Thought(s string) map[string]any { return map[string]any{"text": s, "thought": true} }

// CandidateCount is the number of candidates a request body asks for.
func CandidateCount(body map[string]any) int {
	if gc, _ := body["generationConfig"].(map[string]any); gc != nil {
		if n, ok := gc["candidateCount"].(float64); ok && n > 1 {
			return int(n)
		}
	}
	return 1
}

// Error writes a Google API error with optional details.
func Error(w http.ResponseWriter, code int, status, msg string, details ...map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "status": status, "message": msg, "details": details}})
}

// RateLimited writes a 429 whose RetryInfo asks the client to wait d.
func RateLimited(w http.ResponseWriter, d time.Duration) {
	Error(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "quota per minute",
		map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": fmt.Sprintf("%gs", d.Seconds())})
}
