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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/plugins/models/openai"
	"github.com/kbplatform/kbplatform/plugins/models/openai/openaitest"
	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

const testKey = "sk-gateway-test-3b7e51-secret"

// fixture is a gateway in front of the real openai plugin, across a real gRPC boundary, with a
// real store; logs are captured so that a test can look for the key in them.
type fixture struct {
	st   *store.Store
	dir  string
	srv  *openaitest.Server
	cfg  json.RawMessage
	logs *bytes.Buffer
	mu   sync.Mutex
}

func newFixture(t testing.TB, reply openaitest.Reply) *fixture {
	t.Helper()
	t.Setenv("KBP_TEST_KEY", testKey)
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := openaitest.New(t, reply)
	cfg := json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "m", "api_key_env": "KBP_TEST_KEY", "timeout": "400ms"}`, srv.BaseURL()))
	return &fixture{st: st, dir: dir, srv: srv, cfg: cfg, logs: &bytes.Buffer{}}
}

func (f *fixture) gateway(t testing.TB, o Options, ls *Limiters) *Gateway {
	t.Helper()
	m := plugintest.Connect(t, openai.New()).Model()
	if err := m.Configure(context.Background(), sdk.Configuration{Raw: f.cfg}); err != nil {
		t.Fatal(err)
	}
	o.Name, o.Plugin, o.Config, o.Store, o.Cacheable = "local:m", "model/openai", f.cfg, f.st, true
	if o.Retry.MaxTries == 0 {
		o.Retry = Retry{MaxTries: 4, Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	}
	o.Log = func(s string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.logs.WriteString(s + "\n")
	}
	return New(m, o, ls)
}

var call = Call{Study: "s1", Task: "kbp/l1/relu", Strategy: "strategy/oneshot"}

func ask(text string, n int) sdk.GenerateRequest {
	return sdk.GenerateRequest{Messages: []sdk.Message{{Role: "user", Content: text}}, N: n, TaskID: "kbp/l1/relu"}
}

func TestRetries(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		first     func(w http.ResponseWriter)
		tries     int
		minWait   time.Duration
		wantErr   error
		failClass string
	}{
		{"429 honours Retry-After", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			openaitest.Error(w, 429, "rate_limit_exceeded", "", "slow down")
		}, 2, time.Second, nil, ""},
		{"500 then success", func(w http.ResponseWriter) { openaitest.Error(w, 500, "", "", "boom") }, 2, 0, nil, ""},
		{"timeout then success", func(w http.ResponseWriter) {
			time.Sleep(800 * time.Millisecond)
			openaitest.Completion(w, nil, "late")
		}, 2, 0, nil, ""},
		{"an invalid key is not retried", func(w http.ResponseWriter) { openaitest.Error(w, 401, "invalid_api_key", "", "bad key") }, 1, 0,
			sdk.ErrInvalidAPIKey, sdk.FailureInvalidKey},
		{"malformed JSON is not retried", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"choices": [{"message": `)
		}, 1, 0, sdk.ErrMalformedReply, sdk.FailureMalformedReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(n int, _ map[string]any, w http.ResponseWriter) {
				if n == 1 {
					tc.first(w)
					return
				}
				openaitest.Completion(w, nil, "```python\nclass ModelNew: pass\n```")
			})
			g := f.gateway(t, Options{}, nil)
			start := time.Now()
			resp, err := g.Generate(ctx, call, ask("relu", 1))
			if !errors.Is(err, tc.wantErr) && !(tc.wantErr == nil && err == nil) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			if got := f.srv.Requests(); got != tc.tries {
				t.Errorf("%d requests, want %d", got, tc.tries)
			}
			if el := time.Since(start); el < tc.minWait {
				t.Errorf("retried after %s, the server asked for %s", el, tc.minWait)
			}
			calls, _ := f.st.Calls("s1")
			if len(calls) != 1 || calls[0].Tries != tc.tries || calls[0].Failure != tc.failClass {
				t.Fatalf("records %+v", calls)
			}
			if err == nil && (len(resp.CallIDs) != 1 || resp.CallIDs[0] != calls[0].ID) {
				t.Errorf("call ids %v, record %s", resp.CallIDs, calls[0].ID)
			}
		})
	}
}

// A repeated study sends nothing: every sample comes from the cache, in the same order, and a
// strategy that asks the same question twice gets two samples, not one twice.
func TestCache(t *testing.T) {
	ctx := context.Background()
	var served atomic.Int64
	f := newFixture(t, func(_ int, body map[string]any, w http.ResponseWriter) {
		texts := make([]string, openaitest.N(body))
		for i := range texts {
			texts[i] = fmt.Sprintf("sample %d", served.Add(1))
		}
		openaitest.Completion(w, nil, texts...)
	})
	study := func(o Options) []string {
		g := f.gateway(t, o, nil)
		var got []string
		for _, req := range []sdk.GenerateRequest{ask("relu", 2), ask("relu", 1), ask("softmax", 1)} {
			resp, err := g.Generate(ctx, call, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range resp.Completions {
				got = append(got, c.Text)
			}
		}
		return got
	}
	first := study(Options{})
	if f.srv.Requests() != 3 || strings.Join(first, ",") != "sample 1,sample 2,sample 3,sample 4" {
		t.Fatalf("first run: %d requests, %v", f.srv.Requests(), first)
	}
	again := study(Options{})
	if f.srv.Requests() != 3 {
		t.Errorf("the repeated study sent %d new requests", f.srv.Requests()-3)
	}
	if strings.Join(again, ",") != strings.Join(first, ",") {
		t.Errorf("replayed %v, first run %v", again, first)
	}
	calls, _ := f.st.Calls("s1")
	cached := 0
	for _, c := range calls {
		if c.Cached {
			cached++
		}
	}
	if len(calls) != 6 || cached != 3 {
		t.Errorf("%d calls recorded, %d cached; want 6 and 3", len(calls), cached)
	}
	if study(Options{NoCache: true}); f.srv.Requests() != 6 {
		t.Errorf("no-cache sent %d requests, want 3 more", f.srv.Requests()-3)
	}
}

func TestCost(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, func(_ int, body map[string]any, w http.ResponseWriter) {
		texts := make([]string, openaitest.N(body))
		for i := range texts {
			texts[i] = "x"
		}
		openaitest.Completion(w, nil, texts...)
	})
	prices := Prices{"m-served": {Input: 2, Output: 10}}
	g := f.gateway(t, Options{Prices: prices}, nil)
	for _, req := range []sdk.GenerateRequest{ask("a", 1), ask("b", 3), ask("a", 1)} {
		if _, err := g.Generate(ctx, call, req); err != nil {
			t.Fatal(err)
		}
	}
	// Three paid calls: prompts 3×100 tokens, completions (1+3+1)×20 tokens; then the same three
	// again from a new gateway (a repeated study): cached, free.
	g = f.gateway(t, Options{Prices: prices}, nil)
	for _, req := range []sdk.GenerateRequest{ask("a", 1), ask("b", 3), ask("a", 1)} {
		if _, err := g.Generate(ctx, call, req); err != nil {
			t.Fatal(err)
		}
	}
	calls, err := f.st.Calls("s1")
	if err != nil {
		t.Fatal(err)
	}
	lines := Costs(calls)
	if len(lines) != 1 {
		t.Fatalf("lines %+v", lines)
	}
	l := lines[0]
	want := (300*2.0 + 100*10.0) / 1e6
	if l.Calls != 6 || l.Cached != 3 || l.PromptTokens != 300 || l.CompletionTokens != 100 || math.Abs(l.CostUSD-want) > 1e-12 || l.Unpriced != 0 {
		t.Errorf("got %+v, want 6 calls, 3 cached, 300/100 tokens, $%g", l, want)
	}
	two := Costs(append(calls, store.CallRecord{Model: "other", Strategy: "strategy/oneshot", Usage: sdk.Usage{PromptTokens: 5}}))
	if len(two) != 3 || two[2].Model != "*" || two[2].PromptTokens != 305 || two[1].Unpriced != 1 {
		t.Errorf("with a second model: %+v", two)
	}
}

func TestLimits(t *testing.T) {
	ctx := context.Background()
	var inflight, peak atomic.Int64
	f := newFixture(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
		n := inflight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
		inflight.Add(-1)
		openaitest.Completion(w, nil, "x")
	})
	ls := NewLimiters()
	// Two gateways for one endpoint share its limits.
	gs := []*Gateway{f.gateway(t, Options{Limits: Limits{Concurrency: 2, RequestsPerMinute: 120}}, ls), f.gateway(t, Options{}, ls)}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := gs[i%2].Generate(ctx, call, ask(fmt.Sprint(i), 1)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if peak.Load() > 2 {
		t.Errorf("%d requests in flight at once, limit 2", peak.Load())
	}
	// 120 a minute is 2 a second with a burst of 2: six requests need at least two seconds.
	if el := time.Since(start); el < 2*time.Second-50*time.Millisecond {
		t.Errorf("six requests at 120/min took %s", el)
	}
}

// The key is read by the plugin from its environment and sent to the provider only: it is in no
// record, no cache entry, no file of the database and no log line, even after failures.
func TestKeyNeverStored(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, func(n int, _ map[string]any, w http.ResponseWriter) {
		switch n % 3 {
		case 1:
			openaitest.Completion(w, nil, "ok")
		case 2:
			openaitest.Error(w, 401, "invalid_api_key", "", "Incorrect API key provided")
		default:
			openaitest.Error(w, 500, "", "", "boom")
		}
	})
	g := f.gateway(t, Options{Retry: Retry{MaxTries: 2, Initial: time.Millisecond}}, nil)
	for i := range 4 {
		_, _ = g.Generate(ctx, call, ask(fmt.Sprint(i), 1))
	}
	if f.srv.Auth(0) != "Bearer "+testKey {
		t.Fatalf("the provider did not get the key: %q", f.srv.Auth(0))
	}
	calls, _ := f.st.Calls("s1")
	if len(calls) != 4 {
		t.Fatalf("%d calls recorded", len(calls))
	}
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	err := filepath.Walk(f.dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if bytes.Contains(b, []byte(testKey)) {
			t.Errorf("the key is in %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.logs.Len() == 0 || strings.Contains(f.logs.String(), testKey) {
		t.Errorf("logs (%d bytes) hold the key or nothing was logged:\n%s", f.logs.Len(), f.logs)
	}
}

// Tokens per minute pace calls by what they used: each reply here uses 120 tokens, and at 240 a
// minute (4 a second) the third call waits for the first two's tokens to come back.
func TestTokensPerMinute(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, func(_ int, _ map[string]any, w http.ResponseWriter) { openaitest.Completion(w, nil, "x") })
	g := f.gateway(t, Options{Limits: Limits{TokensPerMinute: 240}}, nil)
	start := time.Now()
	for i := range 3 {
		if _, err := g.Generate(ctx, call, ask(fmt.Sprint(i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el < time.Second {
		t.Errorf("three calls of 120 tokens at 240 tokens a minute took %s", el)
	}
}

// leakyModel is a plugin that puts its key into its errors unredacted, as a careless third-party
// plugin might.
type leakyModel struct{ env string }

func (leakyModel) Info() sdk.Info                                     { return sdk.Info{Kind: sdk.KindModel, Name: "leaky"} }
func (leakyModel) Configure(context.Context, sdk.Configuration) error { return nil }
func (l leakyModel) Generate(context.Context, sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	return nil, fmt.Errorf("%w: HTTP 401: key %s refused", sdk.ErrInvalidAPIKey, os.Getenv(l.env))
}

// The gateway redacts on its own: the key of the variable the settings name, even one whose name
// does not look like a key's, is in no error, log line or record, and the error keeps its class.
func TestGatewayRedactsWhatAPluginLeaks(t *testing.T) {
	const key = "leaky-0123456789abcdef"
	t.Setenv("KBP_LEAKY_ACCESS", key)
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logs bytes.Buffer
	g := New(leakyModel{env: "KBP_LEAKY_ACCESS"}, Options{Name: "leaky", Plugin: "model/leaky", Store: st,
		Config: json.RawMessage(`{"model": "m", "api_key_env": "KBP_LEAKY_ACCESS"}`), Log: func(s string) { logs.WriteString(s + "\n") }}, nil)
	_, err = g.Generate(context.Background(), call, ask("relu", 1))
	if !errors.Is(err, sdk.ErrInvalidAPIKey) || strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "key [redacted] refused") {
		t.Errorf("got %v", err)
	}
	calls, _ := st.Calls(call.Study)
	if len(calls) != 1 || strings.Contains(calls[0].Error, key) || calls[0].Failure != sdk.FailureInvalidKey {
		t.Errorf("records %+v", calls)
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("logs:\n%s", logs.String())
	}
}
