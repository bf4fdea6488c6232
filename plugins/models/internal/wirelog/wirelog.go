// Package wirelog records what a provider's test server was sent, for the test servers of every
// wire protocol (openaitest, anthropictest, geminitest): each request's decoded body, its path
// and the credential it carried, so a test can count requests, read what a plugin sent and check
// where the key went.
package wirelog

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// Request is one request as the server received it.
type Request struct {
	Body       map[string]any
	Path       string
	Credential string
}

// Log is safe for the server's handler and the test to use at once.
type Log struct {
	mu   sync.Mutex
	reqs []Request
}

// Add reads and records r with the credential the server found in it, and returns its number
// (1-based) and decoded body.
func (l *Log) Add(r *http.Request, credential string) (int, map[string]any) {
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, Request{Body: body, Path: r.URL.Path, Credential: credential})
	return len(l.reqs), body
}

// Requests counts the requests received.
func (l *Log) Requests() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// At returns the i-th request (0-based).
func (l *Log) At(i int) Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reqs[i]
}

// Body returns the i-th request's body (0-based).
func (l *Log) Body(i int) map[string]any { return l.At(i).Body }
