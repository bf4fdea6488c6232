// Package gateway is the host's side of every model call: it stands between a study and a model
// plugin and adds, once for every provider, what no single plugin should own: a response cache in
// the store, retries with backoff on transient failures, per-endpoint concurrency and rate limits,
// token accounting with cost, and a record of every call.
//
// It lives in the host because the host is the only process that opens the store, and because a
// limit shared by several studies' models must be enforced where all their calls pass.
package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// Options configure the gateway of one model in a study.
type Options struct {
	// Name is the model's name in the study (a named configuration, or the plugin's name).
	Name string
	// Plugin is the plugin's ref (model/openai).
	Plugin string
	// Config is the plugin's settings; base_url and model name the endpoint, and every setting
	// that shapes a reply is part of the cache key.
	Config json.RawMessage
	Limits Limits
	Retry  Retry
	Prices Prices
	// NoCache sends every request even when a cached reply exists (replies are still stored).
	NoCache bool
	// Cacheable is false for models whose replies cost nothing to make again (replay).
	Cacheable bool
	Store     *store.Store
	// Log receives one line per retry and per failed call; it never sees the plugin's settings.
	Log func(string)
}

// Call says on whose behalf a request is made.
type Call struct {
	Study    string
	Task     string
	Strategy string
	// Arm separates the sample slots of two arms of a study asking the same question, so that
	// which cached sample an arm gets does not depend on which arm ran first.
	Arm string
}

// CallError is a failed call's error with the id of its record.
type CallError struct {
	ID  string
	Err error
}

func (e *CallError) Error() string { return e.Err.Error() }
func (e *CallError) Unwrap() error { return e.Err }

// Gateway wraps one model plugin.
type Gateway struct {
	model    sdk.Model
	o        Options
	endpoint string
	provider string // the model name in the settings, if any
	keyEnv   string // the variable the settings name the key in, if any
	keyBase  []byte // the settings that shape a reply, canonical
	lim      *limiter

	mu      sync.Mutex
	samples map[string]int // samples already drawn per (study, task, request)
}

// New wraps a model. Limits are shared by every gateway the same Limiters hands out for one
// endpoint.
func New(m sdk.Model, o Options, ls *Limiters) *Gateway {
	if o.Log == nil {
		o.Log = func(string) {}
	}
	g := &Gateway{model: m, o: o, samples: map[string]int{}}
	var cfg map[string]any
	_ = json.Unmarshal(o.Config, &cfg)
	base, _ := cfg["base_url"].(string)
	g.provider, _ = cfg["model"].(string)
	g.keyEnv, _ = cfg["api_key_env"].(string)
	g.endpoint = o.Plugin
	if base != "" {
		g.endpoint += " " + base
	}
	// Settings that do not change a reply stay out of the key: renaming the key's variable or
	// raising a timeout must not cost a new request.
	delete(cfg, "api_key_env")
	delete(cfg, "timeout")
	g.keyBase, _ = json.Marshal(cfg) // maps marshal with sorted keys
	if ls == nil {
		ls = NewLimiters()
	}
	g.lim = ls.get(g.endpoint, o.Limits)
	return g
}

// Endpoint names where requests go (the plugin and its base URL).
func (g *Gateway) Endpoint() string { return g.endpoint }

// cacheKey is the key of one sample of a request: endpoint, model and settings, the full
// request, and the sample's index among the identical requests of the same task in the study.
func (g *Gateway) cacheKey(req []byte, index int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", g.endpoint, g.provider)
	h.Write(g.keyBase)
	h.Write([]byte{0})
	h.Write(req)
	fmt.Fprintf(h, "\x00%d", index)
	return hex.EncodeToString(h.Sum(nil))
}

// Generate serves a request from the cache when every sample is there, else sends it (with
// retries, within the endpoint's limits), stores the replies, and records the call either way.
func (g *Gateway) Generate(ctx context.Context, c Call, req sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	if req.N < 1 {
		req.N = 1
	}
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	// Identical requests of one task draw successive samples: a strategy that asks the same
	// question twice wants two answers, and a repeated study asks in the same order.
	sum := sha256.Sum256(reqJSON)
	slot := c.Study + "\x00" + c.Task + "\x00" + hex.EncodeToString(sum[:])
	if c.Arm != "" {
		slot += "\x00" + c.Arm
	}
	g.mu.Lock()
	first := g.samples[slot]
	g.samples[slot] = first + req.N
	g.mu.Unlock()
	keys := make([]string, req.N)
	for i := range keys {
		keys[i] = g.cacheKey(reqJSON, first+i)
	}
	rec := &store.CallRecord{Study: c.Study, Task: c.Task, Strategy: c.Strategy, Model: g.o.Name, Plugin: g.o.Plugin,
		Endpoint: g.endpoint, Request: req, At: time.Now().UTC()}

	if g.o.Cacheable && !g.o.NoCache {
		if resp := g.fromCache(keys); resp != nil {
			rec.Cached, rec.Response, rec.Usage, rec.ProviderModel = true, resp, resp.Usage, resp.Model
			if err := g.o.Store.PutCall(rec); err != nil {
				return nil, err
			}
			resp.CallIDs = []string{rec.ID}
			return resp, nil
		}
	}

	start := time.Now()
	resp, tries, err := g.send(ctx, req)
	rec.Latency, rec.Tries = time.Since(start), tries
	if err != nil {
		rec.Error, rec.Failure = err.Error(), sdk.FailureClass(err)
		g.o.Log(fmt.Sprintf("%s: %s failed after %d tries: %v", g.o.Name, c.Task, tries, err))
		if perr := g.o.Store.PutCall(rec); perr != nil {
			return nil, perr
		}
		return nil, &CallError{ID: rec.ID, Err: err}
	}
	rec.Response, rec.Usage, rec.ProviderModel = resp, resp.Usage, resp.Model
	rec.CostUSD, rec.Priced = g.o.Prices.Cost(resp.Usage, g.o.Name, resp.Model, g.provider)
	if err := g.o.Store.PutCall(rec); err != nil {
		return nil, err
	}
	if g.o.Cacheable {
		entries := map[string]store.CachedCompletion{}
		share := splitUsage(resp.Usage, len(resp.Completions))
		for i, comp := range resp.Completions {
			if i < len(keys) {
				entries[keys[i]] = store.CachedCompletion{Completion: comp, Usage: share[i], ProviderModel: resp.Model, Call: rec.ID, At: rec.At}
			}
		}
		if err := g.o.Store.PutCachedCompletions(entries); err != nil {
			return nil, err
		}
	}
	resp.CallIDs = []string{rec.ID}
	return resp, nil
}

// fromCache returns the reply assembled from cached samples, or nil unless every one is there.
func (g *Gateway) fromCache(keys []string) *sdk.GenerateResponse {
	resp := &sdk.GenerateResponse{}
	for _, k := range keys {
		c, err := g.o.Store.CachedCompletion(k)
		if err != nil {
			return nil
		}
		resp.Completions = append(resp.Completions, c.Completion)
		resp.Usage = addUsage(resp.Usage, c.Usage)
		resp.Model = c.ProviderModel
	}
	return resp
}

// splitUsage shares a call's usage among its n completions: the prompt once, on the first.
func splitUsage(u sdk.Usage, n int) []sdk.Usage {
	if n < 1 {
		return nil
	}
	out := make([]sdk.Usage, n)
	out[0].PromptTokens, out[0].CachedPromptTokens = u.PromptTokens, u.CachedPromptTokens
	for i := range out {
		out[i].CompletionTokens = u.CompletionTokens / int64(n)
		out[i].ReasoningTokens = u.ReasoningTokens / int64(n)
	}
	out[0].CompletionTokens += u.CompletionTokens % int64(n)
	out[0].ReasoningTokens += u.ReasoningTokens % int64(n)
	return out
}

func addUsage(a, b sdk.Usage) sdk.Usage {
	return sdk.Usage{PromptTokens: a.PromptTokens + b.PromptTokens, CompletionTokens: a.CompletionTokens + b.CompletionTokens,
		ReasoningTokens: a.ReasoningTokens + b.ReasoningTokens, CachedPromptTokens: a.CachedPromptTokens + b.CachedPromptTokens}
}
