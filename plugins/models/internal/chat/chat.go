// Package chat holds what the provider plugins (openai, anthropic, gemini) share on their side of
// the boundary: the settings every provider accepts, merging them with a strategy's sampling
// parameters, reading the API key, splitting a request for n completions, and dropping a
// parameter a server rejects. Retries, limits, the cache and cost are the host's (internal/gateway).
package chat

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/secret"
)

// Common are the settings every provider plugin accepts, with the same meaning everywhere.
type Common struct {
	Model string `json:"model"`
	// APIKeyEnv names the environment variable holding the key; the key itself never appears in
	// a setting, a record or a log.
	APIKeyEnv   string       `json:"api_key_env,omitempty"`
	Temperature *float64     `json:"temperature,omitempty"`
	TopP        *float64     `json:"top_p,omitempty"`
	MaxTokens   int          `json:"max_tokens,omitempty"`
	Seed        *int64       `json:"seed,omitempty"`
	N           int          `json:"n,omitempty"` // the most completions one request asks for
	Timeout     sdk.Duration `json:"timeout,omitempty"`
	// DropUnsupported retries a request without a parameter the server rejected (and leaves it
	// out of later requests) instead of failing with an error naming it.
	DropUnsupported bool `json:"drop_unsupported,omitempty"`
}

// CommonSchema is the JSON Schema of the Common settings, for a plugin's schema to include.
const CommonSchema = `"model":            {"type": "string"},
    "api_key_env":      {"type": "string"},
    "temperature":      {"type": "number", "minimum": 0},
    "top_p":            {"type": "number", "minimum": 0, "maximum": 1},
    "max_tokens":       {"type": "integer", "minimum": 1},
    "seed":             {"type": "integer"},
    "n":                {"type": "integer", "minimum": 1},
    "timeout":          {"type": ["string", "number"]},
    "drop_unsupported": {"type": "boolean"}`

// Validate checks the common settings.
func (c Common) Validate() error {
	switch {
	case c.Model == "":
		return fmt.Errorf("%w: model is required", sdk.ErrInvalidConfig)
	case c.Temperature != nil && *c.Temperature < 0:
		return fmt.Errorf("%w: temperature must not be negative", sdk.ErrInvalidConfig)
	case c.TopP != nil && (*c.TopP < 0 || *c.TopP > 1):
		return fmt.Errorf("%w: top_p must be between 0 and 1", sdk.ErrInvalidConfig)
	case c.MaxTokens < 0 || c.N < 0 || c.Timeout < 0:
		return fmt.Errorf("%w: max_tokens, n and timeout must not be negative", sdk.ErrInvalidConfig)
	}
	return nil
}

// TimeoutOr returns the timeout setting, or def when unset.
func (c Common) TimeoutOr(def time.Duration) time.Duration {
	if c.Timeout > 0 {
		return time.Duration(c.Timeout)
	}
	return def
}

// Params are the sampling parameters of one request after merging.
type Params struct {
	Temperature *float64
	TopP        *float64
	MaxTokens   int
	Seed        *int64
	Stop        []string
}

// Merge combines the strategy's parameters with the settings; a setting wins, because it is the
// user's word about this endpoint (a reasoning model that only takes temperature 1, say).
func (c Common) Merge(p sdk.SamplingParams) Params {
	out := Params{Temperature: p.Temperature, TopP: p.TopP, MaxTokens: p.MaxTokens, Seed: p.Seed, Stop: p.Stop}
	if c.Temperature != nil {
		out.Temperature = c.Temperature
	}
	if c.TopP != nil {
		out.TopP = c.TopP
	}
	if c.MaxTokens > 0 {
		out.MaxTokens = c.MaxTokens
	}
	if c.Seed != nil {
		out.Seed = c.Seed
	}
	return out
}

// KeyEnv names the variable the key is read from: the one the settings name, else def (none
// when both are empty). The host gives the plugin's process this variable and no other key.
func (c Common) KeyEnv(def string) string {
	if c.APIKeyEnv != "" {
		return c.APIKeyEnv
	}
	return def
}

// Key reads the API key from the variable the settings name (def when they name none). An unset
// variable is ErrMissingAPIKey when required; a local server may need no key.
func (c Common) Key(def string, required bool) (string, error) {
	name := c.KeyEnv(def)
	if name == "" {
		return "", nil
	}
	key := os.Getenv(name)
	if key == "" && (required || c.APIKeyEnv != "") {
		return "", fmt.Errorf("%w: the environment variable %s is not set", sdk.ErrMissingAPIKey, name)
	}
	return key, nil
}

// Redact removes from a failure's message the key (read from the variable KeyEnv(def) names)
// and every other secret of the plugin's environment: a provider that echoes the key it was sent
// in an error body must not have it logged, stored or shown to a strategy. errors.Is still sees
// the failure.
func (c Common) Redact(err error, def string) error {
	return secret.RedactError(err, secret.InEnv(c.KeyEnv(def))...)
}

// Request sends one provider request for up to n completions.
type Request func(ctx context.Context, n int, drop map[string]bool) (*sdk.GenerateResponse, error)

// Collect gets want completions in requests of at most perRequest (0: all in one), asking again
// for the rest when a server returns fewer than it was asked for; usage is summed.
func Collect(ctx context.Context, want, perRequest int, d *Dropper, send Request) (*sdk.GenerateResponse, error) {
	if want < 1 {
		return nil, fmt.Errorf("%w: n must be at least 1", sdk.ErrInvalidArgument)
	}
	out := &sdk.GenerateResponse{}
	for requests := 0; len(out.Completions) < want; requests++ {
		if requests >= 2*want {
			return nil, fmt.Errorf("%w: %d requests gave %d of %d completions", sdk.ErrEmptyReply, requests, len(out.Completions), want)
		}
		n := want - len(out.Completions)
		if perRequest > 0 && n > perRequest {
			n = perRequest
		}
		resp, err := d.Do(ctx, func(drop map[string]bool) (*sdk.GenerateResponse, error) { return send(ctx, n, drop) })
		if err != nil {
			return nil, err
		}
		out.Model = resp.Model
		out.Usage.PromptTokens += resp.Usage.PromptTokens
		out.Usage.CompletionTokens += resp.Usage.CompletionTokens
		out.Usage.ReasoningTokens += resp.Usage.ReasoningTokens
		out.Usage.CachedPromptTokens += resp.Usage.CachedPromptTokens
		out.Completions = append(out.Completions, resp.Completions...)
	}
	out.Completions = out.Completions[:want]
	return out, nil
}
