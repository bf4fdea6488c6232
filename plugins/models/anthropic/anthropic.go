// Package anthropic is the model plugin for Anthropic's Messages API, through
// github.com/anthropics/anthropic-sdk-go with the SDK's own retries off: the host retries,
// paces and caches every provider the same way (internal/gateway). The API has no n, so a request
// for several completions is sent as several requests.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/kbplatform/kbplatform/plugins/models/internal/chat"
	"github.com/kbplatform/kbplatform/sdk"
)

// Version of the plugin.
const Version = "0.1.0"

// Settings of the plugin (docs/models.md). Unknown keys are an error.
type Settings struct {
	chat.Common
	// BaseURL is the API root (default https://api.anthropic.com), for a proxy or gateway.
	BaseURL string `json:"base_url,omitempty"`
	// ThinkingBudget turns extended thinking on with this many tokens (at least 1024, below
	// max_tokens); the thinking is recorded apart from the answer.
	ThinkingBudget int `json:"thinking_budget,omitempty"`
	// ExtraBody is merged into every request body (top_k, service_tier, ...).
	ExtraBody map[string]any `json:"extra_body,omitempty"`
}

const schema = `{
  "type": "object",
  "properties": {
    ` + chat.CommonSchema + `,
    "base_url":        {"type": "string"},
    "thinking_budget": {"type": "integer", "minimum": 1024},
    "extra_body":      {"type": "object"}
  },
  "required": ["model"],
  "additionalProperties": false
}`

const (
	defaultTimeout   = 10 * time.Minute
	defaultMaxTokens = 8192 // the API requires max_tokens
	defaultBaseURL   = "https://api.anthropic.com/"
	defaultKeyEnv    = "ANTHROPIC_API_KEY" // where the key is read from when api_key_env names nothing
)

// SecretEnv names the environment variables the plugin reads a credential from under these
// settings: the host starts its process with these and no other secret (docs/models.md).
func SecretEnv(config json.RawMessage) []string {
	var s Settings
	_ = json.Unmarshal(config, &s) // settings that do not decode name the default; Configure reports them
	return []string{s.KeyEnv(defaultKeyEnv)}
}

// Model implements sdk.Model.
type Model struct {
	mu   sync.Mutex
	s    Settings
	drop *chat.Dropper
	http *http.Client
}

var _ sdk.Model = (*Model)(nil)

// New returns an unconfigured model.
func New() *Model { return &Model{} }

// Info identifies the plugin.
func (*Model) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindModel, Name: "anthropic", Version: Version, ConfigSchema: schema,
		Capabilities: []string{"n>1", "reasoning"}, Description: "Anthropic's Messages API (Claude), with extended thinking"}
}

// Configure reads the settings; a missing key is reported with each generation.
func (m *Model) Configure(_ context.Context, c sdk.Configuration) error {
	var s Settings
	if err := c.Decode(&s); err != nil {
		return err
	}
	if err := s.Validate(); err != nil {
		return err
	}
	if s.ThinkingBudget != 0 && s.ThinkingBudget < 1024 {
		return fmt.Errorf("%w: thinking_budget must be at least 1024 tokens", sdk.ErrInvalidConfig)
	}
	for k := range s.ExtraBody {
		if k == "model" || k == "messages" || k == "system" {
			return fmt.Errorf("%w: extra_body must not set %q", sdk.ErrInvalidConfig, k)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.s = s
	m.drop = &chat.Dropper{Enabled: s.DropUnsupported, Sent: s.optional}
	m.http = &http.Client{Timeout: s.TimeoutOr(defaultTimeout)}
	return nil
}

func (s Settings) optional() []string {
	names := []string{"temperature", "top_p", "stop_sequences", "thinking"}
	for k := range s.ExtraBody {
		names = append(names, k)
	}
	return names
}

// Generate asks for req.N completions, one request each.
func (m *Model) Generate(ctx context.Context, req sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	m.mu.Lock()
	s, drop, hc := m.s, m.drop, m.http
	m.mu.Unlock()
	switch {
	case drop == nil:
		return nil, fmt.Errorf("%w: the plugin is not configured", sdk.ErrInvalidConfig)
	case req.N < 1:
		return nil, fmt.Errorf("%w: n must be at least 1", sdk.ErrInvalidArgument)
	case len(req.Messages) == 0:
		return nil, fmt.Errorf("%w: no messages", sdk.ErrInvalidArgument)
	}
	key, err := s.Key(defaultKeyEnv, true)
	if err != nil {
		return nil, err
	}
	base := s.BaseURL
	if base == "" {
		base = defaultBaseURL
	}
	svc := ant.NewMessageService(option.WithHTTPClient(hc), option.WithMaxRetries(0), option.WithBaseURL(base), option.WithAPIKey(key))
	p := s.Merge(req.Params)
	return chat.Collect(ctx, req.N, 1, drop, func(ctx context.Context, _ int, dropped map[string]bool) (*sdk.GenerateResponse, error) {
		params, extra := s.params(req.Messages, p, dropped)
		msg, err := svc.New(ctx, params, extra...)
		if err != nil {
			return nil, s.Redact(classify(ctx, err), defaultKeyEnv)
		}
		return reply(msg)
	})
}

func (s Settings) params(msgs []sdk.Message, p chat.Params, dropped map[string]bool) (ant.MessageNewParams, []option.RequestOption) {
	out := ant.MessageNewParams{Model: ant.Model(s.Model), MaxTokens: int64(p.MaxTokens)}
	if out.MaxTokens == 0 {
		out.MaxTokens = defaultMaxTokens
	}
	for _, msg := range msgs {
		switch msg.Role {
		case "system":
			out.System = append(out.System, ant.TextBlockParam{Text: msg.Content})
		case "assistant":
			out.Messages = append(out.Messages, ant.NewAssistantMessage(ant.NewTextBlock(msg.Content)))
		default:
			out.Messages = append(out.Messages, ant.NewUserMessage(ant.NewTextBlock(msg.Content)))
		}
	}
	if len(p.Stop) > 0 && !dropped["stop_sequences"] {
		out.StopSequences = p.Stop
	}
	if s.ThinkingBudget > 0 && !dropped["thinking"] {
		out.Thinking = ant.ThinkingConfigParamOfEnabled(int64(s.ThinkingBudget))
	}
	// Sampling parameters go in as plain fields: the API takes them, the SDK's params struct of
	// this version does not carry them. The seed has no counterpart in this API.
	var extra []option.RequestOption
	if p.Temperature != nil && !dropped["temperature"] {
		extra = append(extra, option.WithJSONSet("temperature", *p.Temperature))
	}
	if p.TopP != nil && !dropped["top_p"] {
		extra = append(extra, option.WithJSONSet("top_p", *p.TopP))
	}
	keys := make([]string, 0, len(s.ExtraBody))
	for k := range s.ExtraBody {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !dropped[k] {
			extra = append(extra, option.WithJSONSet(k, s.ExtraBody[k]))
		}
	}
	return out, extra
}

// reply joins the text blocks into the answer and the thinking blocks into the reasoning.
func reply(msg *ant.Message) (*sdk.GenerateResponse, error) {
	if msg == nil {
		return nil, fmt.Errorf("%w: no message", sdk.ErrEmptyReply)
	}
	var text, thinking []string
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "thinking":
			thinking = append(thinking, b.Thinking)
		}
	}
	answer := strings.Join(text, "")
	switch {
	case msg.StopReason == ant.StopReasonRefusal:
		return nil, fmt.Errorf("%w: the model refused (stop reason refusal)", sdk.ErrContentFiltered)
	case strings.TrimSpace(answer) == "":
		return nil, fmt.Errorf("%w: no text in the reply (stop reason %q)", sdk.ErrEmptyReply, msg.StopReason)
	}
	u := msg.Usage
	return &sdk.GenerateResponse{Model: string(msg.Model),
		Usage: sdk.Usage{PromptTokens: u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens, CompletionTokens: u.OutputTokens,
			ReasoningTokens: u.OutputTokensDetails.ThinkingTokens, CachedPromptTokens: u.CacheReadInputTokens},
		Completions: []sdk.Completion{{Text: answer, FinishReason: string(msg.StopReason), Reasoning: strings.Join(thinking, "\n")}}}, nil
}

func classify(ctx context.Context, err error) error {
	var apiErr *ant.Error
	if errors.As(err, &apiErr) {
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		msg := apiErr.Message
		if msg == "" {
			msg = apiErr.RawJSON()
		}
		return sdk.HTTPFailure(apiErr.StatusCode, h, string(apiErr.Type()), msg)
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) || strings.Contains(err.Error(), "error parsing response json") || strings.Contains(err.Error(), "unexpected end of JSON") {
		return fmt.Errorf("%w: the reply is not a message: %v", sdk.ErrMalformedReply, err)
	}
	return sdk.TransportFailure(ctx, err)
}
