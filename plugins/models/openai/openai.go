// Package openai is the model plugin for OpenAI's chat completions API and every server that
// speaks it: vLLM, SGLang, Ollama, llama.cpp's server, TGI, DeepSeek, Together, Fireworks,
// OpenRouter. It talks through github.com/openai/openai-go with the SDK's own retries off: the
// host retries, paces and caches every provider the same way (internal/gateway).
package openai

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

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/kbplatform/kbplatform/plugins/models/internal/chat"
	"github.com/kbplatform/kbplatform/sdk"
)

// Version of the plugin.
const Version = "0.1.0"

// Settings of the plugin (docs/models.md). Unknown keys are an error.
type Settings struct {
	chat.Common
	// BaseURL is the server's API root, with its /v1 (default: OpenAI's).
	BaseURL string `json:"base_url,omitempty"`
	// ReasoningEffort is sent as reasoning_effort (minimal, low, medium, high).
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// ExtraBody is merged into every request body, for server-specific fields
	// (top_k, repetition_penalty, chat_template_kwargs, ...).
	ExtraBody map[string]any `json:"extra_body,omitempty"`
}

const schema = `{
  "type": "object",
  "properties": {
    ` + chat.CommonSchema + `,
    "base_url":         {"type": "string"},
    "reasoning_effort": {"type": "string"},
    "extra_body":       {"type": "object"}
  },
  "required": ["model"],
  "additionalProperties": false
}`

// defaultTimeout bounds one HTTP request unless the settings say otherwise; reasoning models
// can think for minutes.
const defaultTimeout = 10 * time.Minute

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
	return sdk.Info{Kind: sdk.KindModel, Name: "openai", Version: Version, ConfigSchema: schema,
		Capabilities: []string{"n>1", "reasoning"},
		Description:  "OpenAI chat completions, or any OpenAI-compatible server by base_url (vLLM, SGLang, Ollama, DeepSeek, ...)"}
}

// Configure reads the settings. A missing key is not an error here: it is reported with each
// generation, so a study records it against its attempts and goes on.
func (m *Model) Configure(_ context.Context, c sdk.Configuration) error {
	var s Settings
	if err := c.Decode(&s); err != nil {
		return err
	}
	if err := s.Validate(); err != nil {
		return err
	}
	if s.BaseURL != "" && !strings.HasPrefix(s.BaseURL, "http://") && !strings.HasPrefix(s.BaseURL, "https://") {
		return fmt.Errorf("%w: base_url %q must start with http:// or https://", sdk.ErrInvalidConfig, s.BaseURL)
	}
	for k := range s.ExtraBody {
		if k == "model" || k == "messages" {
			return fmt.Errorf("%w: extra_body must not set %q", sdk.ErrInvalidConfig, k)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.s = s
	m.drop = &chat.Dropper{Enabled: s.DropUnsupported, Sent: m.optional}
	m.http = &http.Client{Timeout: s.TimeoutOr(defaultTimeout)}
	return nil
}

// official reports whether requests go to OpenAI itself, which wants max_completion_tokens
// where compatible servers still read max_tokens.
func (s Settings) official() bool {
	return s.BaseURL == "" || strings.Contains(s.BaseURL, "api.openai.com")
}

// defaultKeyEnv is where the key is read from when api_key_env names nothing: OPENAI_API_KEY for
// OpenAI itself; another server gets no key unless its settings name one.
func (s Settings) defaultKeyEnv() string {
	if s.official() {
		return "OPENAI_API_KEY"
	}
	return ""
}

// SecretEnv names the environment variables the plugin reads a credential from under these
// settings: the host starts its process with these and no other secret (docs/models.md).
func SecretEnv(config json.RawMessage) []string {
	var s Settings
	_ = json.Unmarshal(config, &s) // settings that do not decode name the default; Configure reports them
	if name := s.KeyEnv(s.defaultKeyEnv()); name != "" {
		return []string{name}
	}
	return nil
}

// optional lists the optional parameters a request may carry, by their wire names.
func (m *Model) optional() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := []string{"temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "n", "stop", "reasoning_effort"}
	for k := range m.s.ExtraBody {
		names = append(names, k)
	}
	return names
}

// Generate asks for req.N completions.
func (m *Model) Generate(ctx context.Context, req sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	m.mu.Lock()
	s, drop, hc := m.s, m.drop, m.http
	m.mu.Unlock()
	if drop == nil {
		return nil, fmt.Errorf("%w: the plugin is not configured", sdk.ErrInvalidConfig)
	}
	if req.N < 1 {
		return nil, fmt.Errorf("%w: n must be at least 1", sdk.ErrInvalidArgument)
	}
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("%w: no messages", sdk.ErrInvalidArgument)
	}
	key, err := s.Key(s.defaultKeyEnv(), s.official())
	if err != nil {
		return nil, err
	}
	// The client is built without the SDK's environment defaults (OPENAI_BASE_URL and the
	// like): the settings alone say where requests go.
	opts := []option.RequestOption{option.WithHTTPClient(hc), option.WithMaxRetries(0)}
	if s.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(s.BaseURL))
	} else {
		opts = append(opts, option.WithBaseURL("https://api.openai.com/v1/"))
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	svc := oai.NewChatCompletionService(opts...)
	p := s.Merge(req.Params)
	return chat.Collect(ctx, req.N, s.N, drop, func(ctx context.Context, n int, dropped map[string]bool) (*sdk.GenerateResponse, error) {
		params, extra := s.params(req.Messages, p, n, dropped)
		c, err := svc.New(ctx, params, extra...)
		if err != nil {
			return nil, s.Redact(classify(ctx, err), s.defaultKeyEnv())
		}
		return reply(c)
	})
}

// params builds the request, leaving out what the server rejected before.
func (s Settings) params(msgs []sdk.Message, p chat.Params, n int, dropped map[string]bool) (oai.ChatCompletionNewParams, []option.RequestOption) {
	out := oai.ChatCompletionNewParams{Model: shared.ChatModel(s.Model)}
	for _, msg := range msgs {
		switch msg.Role {
		case "system":
			out.Messages = append(out.Messages, oai.SystemMessage(msg.Content))
		case "assistant":
			out.Messages = append(out.Messages, oai.AssistantMessage(msg.Content))
		default:
			out.Messages = append(out.Messages, oai.UserMessage(msg.Content))
		}
	}
	if p.Temperature != nil && !dropped["temperature"] {
		out.Temperature = oai.Float(*p.Temperature)
	}
	if p.TopP != nil && !dropped["top_p"] {
		out.TopP = oai.Float(*p.TopP)
	}
	if p.MaxTokens > 0 {
		if s.official() && !dropped["max_completion_tokens"] {
			out.MaxCompletionTokens = oai.Int(int64(p.MaxTokens))
		} else if !s.official() && !dropped["max_tokens"] {
			out.MaxTokens = oai.Int(int64(p.MaxTokens))
		}
	}
	if p.Seed != nil && !dropped["seed"] {
		out.Seed = oai.Int(*p.Seed)
	}
	if n > 1 && !dropped["n"] {
		out.N = oai.Int(int64(n))
	}
	if len(p.Stop) > 0 && !dropped["stop"] {
		out.Stop = oai.ChatCompletionNewParamsStopUnion{OfStringArray: p.Stop}
	}
	if s.ReasoningEffort != "" && !dropped["reasoning_effort"] {
		out.ReasoningEffort = shared.ReasoningEffort(s.ReasoningEffort)
	}
	keys := make([]string, 0, len(s.ExtraBody))
	for k := range s.ExtraBody {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var extra []option.RequestOption
	for _, k := range keys {
		if !dropped[k] {
			extra = append(extra, option.WithJSONSet(k, s.ExtraBody[k]))
		}
	}
	return out, extra
}

// reply turns a chat completion into completions, with the reasoning apart from the answer.
func reply(c *oai.ChatCompletion) (*sdk.GenerateResponse, error) {
	if c == nil || len(c.Choices) == 0 {
		return nil, fmt.Errorf("%w: the server returned no choices", sdk.ErrEmptyReply)
	}
	u := c.Usage
	out := &sdk.GenerateResponse{Model: c.Model, Usage: sdk.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens, CachedPromptTokens: u.PromptTokensDetails.CachedTokens}}
	filtered, empty := 0, 0
	for _, ch := range c.Choices {
		comp := sdk.Completion{Text: ch.Message.Content, FinishReason: ch.FinishReason, Reasoning: reasoning(ch.Message)}
		switch {
		case ch.FinishReason == "content_filter" || (ch.Message.Refusal != "" && ch.Message.Content == ""):
			filtered++
		case strings.TrimSpace(comp.Text) == "":
			empty++
		}
		out.Completions = append(out.Completions, comp)
	}
	switch {
	case filtered == len(c.Choices):
		return nil, fmt.Errorf("%w: finish reason %q %s", sdk.ErrContentFiltered, c.Choices[0].FinishReason, c.Choices[0].Message.Refusal)
	case filtered+empty == len(c.Choices):
		return nil, fmt.Errorf("%w: no text in %d choices (finish reason %q)", sdk.ErrEmptyReply, len(c.Choices), c.Choices[0].FinishReason)
	}
	return out, nil
}

// reasoning reads the reasoning fields compatible servers add to the message: reasoning_content
// (DeepSeek, vLLM, SGLang) or reasoning (Ollama, OpenRouter).
func reasoning(msg oai.ChatCompletionMessage) string {
	for _, k := range []string{"reasoning_content", "reasoning"} {
		// Fields outside the OpenAI schema are kept raw (Valid reports only known fields).
		f, ok := msg.JSON.ExtraFields[k]
		if !ok || f.Raw() == "" {
			continue
		}
		var s string
		if err := json.Unmarshal([]byte(f.Raw()), &s); err == nil && s != "" {
			return s
		}
	}
	return ""
}

// classify maps the SDK's errors to the generation failures.
func classify(ctx context.Context, err error) error {
	var apiErr *oai.Error
	if errors.As(err, &apiErr) {
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		msg := apiErr.Message
		if apiErr.Param != "" {
			msg += " (param " + apiErr.Param + ")"
		}
		if msg == "" {
			msg = apiErr.RawJSON()
		}
		return sdk.HTTPFailure(apiErr.StatusCode, h, apiErr.Code, msg)
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) || strings.Contains(err.Error(), "error parsing response json") {
		return fmt.Errorf("%w: the reply is not a chat completion: %v", sdk.ErrMalformedReply, err)
	}
	return sdk.TransportFailure(ctx, err)
}
