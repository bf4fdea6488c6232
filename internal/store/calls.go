package store

import (
	"errors"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
)

// Model calls and the response cache. Every call a study makes to a model is recorded under its
// study (request, reply, latency, tokens, cost, error) and linked to the attempt it produced; the
// cache holds each completion under a key of (endpoint, model, request, sample index), so a
// repeated study replays instead of paying again.
const (
	pCall  = "mc/"
	pCache = "mcache/"
)

// CallRecord is one model call as the host saw it: a cache hit, or a request sent (with its
// retries) and what came back.
type CallRecord struct {
	ID       string `json:"id"`
	Study    string `json:"study"`
	Task     string `json:"task"`
	Strategy string `json:"strategy"`
	// Model is the model's name in the study (a named configuration such as vllm:qwen-coder,
	// or the plugin's name); Plugin is the plugin that served it.
	Model    string `json:"model"`
	Plugin   string `json:"plugin"`
	Endpoint string `json:"endpoint,omitempty"`
	// ProviderModel is the model name the provider reported.
	ProviderModel string                `json:"provider_model,omitempty"`
	Request       sdk.GenerateRequest   `json:"request"`
	Response      *sdk.GenerateResponse `json:"response,omitempty"`
	Cached        bool                  `json:"cached,omitempty"`
	Tries         int                   `json:"tries"`
	Latency       time.Duration         `json:"latency_ns"`
	Usage         sdk.Usage             `json:"usage"`
	// CostUSD is what the call cost at the price table's rates (0 for a cache hit); Priced is
	// false when the table has no price for the model.
	CostUSD float64   `json:"cost_usd"`
	Priced  bool      `json:"priced"`
	Error   string    `json:"error,omitempty"`
	Failure string    `json:"failure,omitempty"` // sdk.Failure* class of Error
	Attempt string    `json:"attempt,omitempty"` // the attempt the call produced
	At      time.Time `json:"at"`
}

func callKey(study, id string) string { return pCall + study + "\x00" + id }

// PutCall stores a call record (a new id when it has none).
func (s *Store) PutCall(c *CallRecord) error {
	if c.ID == "" {
		c.ID = NewID(time.Now())
	}
	if c.At.IsZero() {
		c.At = time.Now().UTC()
	}
	b, err := encode("call", c)
	if err != nil {
		return err
	}
	return s.put(map[string][]byte{callKey(c.Study, c.ID): b})
}

// Calls lists a study's model calls, oldest first.
func (s *Store) Calls(study string) ([]CallRecord, error) {
	var out []CallRecord
	err := s.scan(pCall+study+"\x00", false, func(_, v []byte) (bool, error) {
		var c CallRecord
		if err := decode(v, "call", &c); err != nil {
			return false, err
		}
		out = append(out, c)
		return true, nil
	})
	return out, err
}

// LinkCalls records that the calls produced the attempt. Unknown ids are skipped: a strategy
// may pass back ids the host never made.
func (s *Store) LinkCalls(study string, ids []string, attempt string) error {
	for _, id := range ids {
		var c CallRecord
		err := s.get(callKey(study, id), "call", &c)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		c.Attempt = attempt
		if err := s.PutCall(&c); err != nil {
			return err
		}
	}
	return nil
}

// CachedCompletion is one completion in the response cache.
type CachedCompletion struct {
	Completion    sdk.Completion `json:"completion"`
	Usage         sdk.Usage      `json:"usage"` // this completion's share of its call's usage
	ProviderModel string         `json:"provider_model,omitempty"`
	Call          string         `json:"call,omitempty"` // the call that paid for it
	At            time.Time      `json:"at"`
}

// CachedCompletion returns the cached completion under key, or ErrNotFound.
func (s *Store) CachedCompletion(key string) (*CachedCompletion, error) {
	var c CachedCompletion
	if err := s.get(pCache+key, "cache", &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// PutCachedCompletions stores completions under their keys in one transaction.
func (s *Store) PutCachedCompletions(entries map[string]CachedCompletion) error {
	kvs := make(map[string][]byte, len(entries))
	for k, c := range entries {
		b, err := encode("cache", c)
		if err != nil {
			return err
		}
		kvs[pCache+k] = b
	}
	return s.put(kvs)
}
