// Package gemini is the model plugin for Google's Gemini models, on the Gemini API or Vertex AI,
// through google.golang.org/genai: the SDK Google maintains, which replaced the deprecated
// github.com/google/generative-ai-go. The SDK's retries stay off: the host retries, paces and
// caches every provider the same way (internal/gateway).
package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/genai"

	"github.com/kbplatform/kbplatform/plugins/models/internal/chat"
	"github.com/kbplatform/kbplatform/sdk"
)

// Version of the plugin.
const Version = "0.1.0"

// Settings of the plugin (docs/models.md). Unknown keys are an error.
type Settings struct {
	chat.Common
	// Backend is "gemini" (the Gemini API, default) or "vertex" (Vertex AI).
	Backend string `json:"backend,omitempty"`
	// Project and Location name the Vertex AI project; without an API key Vertex uses the
	// application default credentials.
	Project  string `json:"project,omitempty"`
	Location string `json:"location,omitempty"`
	// BaseURL overrides the API root (a proxy, a regional endpoint).
	BaseURL string `json:"base_url,omitempty"`
	// ThinkingBudget bounds a thinking model's thinking tokens (0: the model's default,
	// -1: dynamic); the thoughts are recorded apart from the answer.
	ThinkingBudget *int `json:"thinking_budget,omitempty"`
	// ExtraBody is merged into every request body (generationConfig fields the SDK lacks).
	ExtraBody map[string]any `json:"extra_body,omitempty"`
}

const schema = `{
  "type": "object",
  "properties": {
    ` + chat.CommonSchema + `,
    "backend":         {"enum": ["gemini", "vertex"]},
    "project":         {"type": "string"},
    "location":        {"type": "string"},
    "base_url":        {"type": "string"},
    "thinking_budget": {"type": "integer", "minimum": -1},
    "extra_body":      {"type": "object"}
  },
  "required": ["model"],
  "additionalProperties": false
}`

const defaultTimeout = 10 * time.Minute

// Model implements sdk.Model.
type Model struct {
	mu   sync.Mutex
	s    Settings
	drop *chat.Dropper
}

var _ sdk.Model = (*Model)(nil)

// New returns an unconfigured model.
func New() *Model { return &Model{} }

// Info identifies the plugin.
func (*Model) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindModel, Name: "gemini", Version: Version, ConfigSchema: schema,
		Capabilities: []string{"n>1", "reasoning"}, Description: "Gemini on the Gemini API or Vertex AI (google.golang.org/genai), with thinking budgets"}
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
	switch s.Backend {
	case "", "gemini":
	case "vertex":
		if s.Project == "" || s.Location == "" {
			return fmt.Errorf("%w: backend vertex needs project and location", sdk.ErrInvalidConfig)
		}
	default:
		return fmt.Errorf("%w: backend %q (gemini or vertex)", sdk.ErrInvalidConfig, s.Backend)
	}
	if s.ThinkingBudget != nil && *s.ThinkingBudget < -1 {
		return fmt.Errorf("%w: thinking_budget must be -1 (dynamic) or more", sdk.ErrInvalidConfig)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.s = s
	m.drop = &chat.Dropper{Enabled: s.DropUnsupported, Sent: s.optional}
	return nil
}

// optional lists the parameters as the API's error messages name them.
func (s Settings) optional() []string {
	names := []string{"temperature", "top_p", "seed", "candidate_count", "stop_sequences", "thinking_config", "thinking_budget"}
	for k := range s.ExtraBody {
		names = append(names, k)
	}
	return names
}

func (s Settings) vertex() bool { return s.Backend == "vertex" }

// defaultKeyEnv is where the key is read from when api_key_env names nothing: GEMINI_API_KEY on
// the Gemini API; Vertex AI uses application default credentials instead.
func (s Settings) defaultKeyEnv() string {
	if s.vertex() {
		return ""
	}
	return "GEMINI_API_KEY"
}

// SecretEnv names the environment variables the plugin reads a credential from under these
// settings: the host starts its process with these and no other secret (docs/models.md). On
// Vertex AI without a key that is GOOGLE_APPLICATION_CREDENTIALS, the file of the application
// default credentials, when the user keeps them there.
func SecretEnv(config json.RawMessage) []string {
	var s Settings
	_ = json.Unmarshal(config, &s) // settings that do not decode name the default; Configure reports them
	if name := s.KeyEnv(s.defaultKeyEnv()); name != "" {
		return []string{name}
	}
	if s.vertex() {
		return []string{"GOOGLE_APPLICATION_CREDENTIALS"}
	}
	return nil
}

// client builds a genai client from the settings alone: the key comes from the variable
// api_key_env names (GEMINI_API_KEY by default), never from a setting.
func (s Settings) client(ctx context.Context) (*genai.Client, error) {
	key, err := s.Key(s.defaultKeyEnv(), !s.vertex())
	if err != nil {
		return nil, err
	}
	timeout := s.TimeoutOr(defaultTimeout)
	one := int32(1)
	cc := &genai.ClientConfig{APIKey: key, HTTPClient: &http.Client{Timeout: timeout},
		HTTPOptions: genai.HTTPOptions{BaseURL: s.BaseURL, Timeout: &timeout, RetryOptions: &genai.HTTPRetryOptions{Attempts: &one}}}
	if s.vertex() {
		cc.Backend, cc.Project, cc.Location = genai.BackendVertexAI, s.Project, s.Location
		if key != "" {
			cc.Project, cc.Location = "", "" // express mode: the key alone
		}
	} else {
		cc.Backend = genai.BackendGeminiAPI
	}
	c, err := genai.NewClient(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sdk.ErrInvalidConfig, err)
	}
	return c, nil
}

// Generate asks for req.N candidates (candidate_count, split by n when set).
func (m *Model) Generate(ctx context.Context, req sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	m.mu.Lock()
	s, drop := m.s, m.drop
	m.mu.Unlock()
	switch {
	case drop == nil:
		return nil, fmt.Errorf("%w: the plugin is not configured", sdk.ErrInvalidConfig)
	case req.N < 1:
		return nil, fmt.Errorf("%w: n must be at least 1", sdk.ErrInvalidArgument)
	case len(req.Messages) == 0:
		return nil, fmt.Errorf("%w: no messages", sdk.ErrInvalidArgument)
	}
	client, err := s.client(ctx)
	if err != nil {
		return nil, s.Redact(err, s.defaultKeyEnv())
	}
	p := s.Merge(req.Params)
	return chat.Collect(ctx, req.N, s.N, drop, func(ctx context.Context, n int, dropped map[string]bool) (*sdk.GenerateResponse, error) {
		contents, cfg := s.request(req.Messages, p, n, dropped)
		resp, err := client.Models.GenerateContent(ctx, s.Model, contents, cfg)
		if err != nil {
			return nil, s.Redact(classify(ctx, err), s.defaultKeyEnv())
		}
		return reply(resp)
	})
}

func (s Settings) request(msgs []sdk.Message, p chat.Params, n int, dropped map[string]bool) ([]*genai.Content, *genai.GenerateContentConfig) {
	cfg := &genai.GenerateContentConfig{}
	var contents []*genai.Content
	var system []*genai.Part
	for _, msg := range msgs {
		switch msg.Role {
		case "system":
			system = append(system, &genai.Part{Text: msg.Content})
		case "assistant":
			contents = append(contents, genai.NewContentFromText(msg.Content, genai.RoleModel))
		default:
			contents = append(contents, genai.NewContentFromText(msg.Content, genai.RoleUser))
		}
	}
	if len(system) > 0 {
		cfg.SystemInstruction = &genai.Content{Parts: system}
	}
	if p.Temperature != nil && !dropped["temperature"] {
		t := float32(*p.Temperature)
		cfg.Temperature = &t
	}
	if p.TopP != nil && !dropped["top_p"] {
		t := float32(*p.TopP)
		cfg.TopP = &t
	}
	if p.MaxTokens > 0 {
		cfg.MaxOutputTokens = int32(p.MaxTokens)
	}
	if p.Seed != nil && !dropped["seed"] {
		sd := int32(*p.Seed)
		cfg.Seed = &sd
	}
	if n > 1 && !dropped["candidate_count"] {
		cfg.CandidateCount = int32(n)
	}
	if len(p.Stop) > 0 && !dropped["stop_sequences"] {
		cfg.StopSequences = p.Stop
	}
	if s.ThinkingBudget != nil && !dropped["thinking_config"] && !dropped["thinking_budget"] {
		b := int32(*s.ThinkingBudget)
		cfg.ThinkingConfig = &genai.ThinkingConfig{ThinkingBudget: &b, IncludeThoughts: true}
	}
	if len(s.ExtraBody) > 0 {
		extra := map[string]any{}
		for k, v := range s.ExtraBody {
			if !dropped[k] {
				extra[k] = v
			}
		}
		cfg.HTTPOptions = &genai.HTTPOptions{ExtraBody: extra}
	}
	return contents, cfg
}

// blocked finish reasons: the reply was withheld.
var blocked = map[genai.FinishReason]bool{genai.FinishReasonSafety: true, genai.FinishReasonRecitation: true,
	genai.FinishReasonBlocklist: true, genai.FinishReasonProhibitedContent: true, "SPII": true, "IMAGE_SAFETY": true}

// reply splits each candidate's parts into the answer and the thoughts.
func reply(r *genai.GenerateContentResponse) (*sdk.GenerateResponse, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: no response", sdk.ErrEmptyReply)
	}
	if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
		return nil, fmt.Errorf("%w: the prompt was blocked (%s) %s", sdk.ErrContentFiltered, r.PromptFeedback.BlockReason, r.PromptFeedback.BlockReasonMessage)
	}
	if len(r.Candidates) == 0 {
		return nil, fmt.Errorf("%w: no candidates", sdk.ErrEmptyReply)
	}
	out := &sdk.GenerateResponse{Model: r.ModelVersion}
	if u := r.UsageMetadata; u != nil {
		// Thought tokens are billed as output: they count as completion tokens here.
		out.Usage = sdk.Usage{PromptTokens: int64(u.PromptTokenCount), CompletionTokens: int64(u.CandidatesTokenCount + u.ThoughtsTokenCount),
			ReasoningTokens: int64(u.ThoughtsTokenCount), CachedPromptTokens: int64(u.CachedContentTokenCount)}
	}
	filtered, empty := 0, 0
	for _, c := range r.Candidates {
		var text, thoughts []string
		if c.Content != nil {
			for _, part := range c.Content.Parts {
				switch {
				case part == nil:
				case part.Thought:
					thoughts = append(thoughts, part.Text)
				default:
					text = append(text, part.Text)
				}
			}
		}
		comp := sdk.Completion{Text: strings.Join(text, ""), FinishReason: string(c.FinishReason), Reasoning: strings.Join(thoughts, "")}
		switch {
		case blocked[c.FinishReason]:
			filtered++
		case strings.TrimSpace(comp.Text) == "":
			empty++
		}
		out.Completions = append(out.Completions, comp)
	}
	switch {
	case filtered == len(r.Candidates):
		return nil, fmt.Errorf("%w: finish reason %s", sdk.ErrContentFiltered, r.Candidates[0].FinishReason)
	case filtered+empty == len(r.Candidates):
		return nil, fmt.Errorf("%w: no text in %d candidates (finish reason %s)", sdk.ErrEmptyReply, len(r.Candidates), r.Candidates[0].FinishReason)
	}
	return out, nil
}

// classify maps genai's errors; Google APIs say how long to wait in a RetryInfo detail.
func classify(ctx context.Context, err error) error {
	var apiErr genai.APIError
	if errors.As(err, &apiErr) {
		h := http.Header{}
		for _, d := range apiErr.Details {
			if t, _ := d["@type"].(string); strings.HasSuffix(t, "google.rpc.RetryInfo") {
				if delay, _ := d["retryDelay"].(string); delay != "" {
					if dur, perr := time.ParseDuration(delay); perr == nil {
						h.Set("Retry-After", fmt.Sprint(dur.Seconds()))
					}
				}
			}
		}
		return sdk.HTTPFailure(apiErr.Code, h, apiErr.Status, apiErr.Message)
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) || strings.Contains(err.Error(), "error unmarshalling response") {
		return fmt.Errorf("%w: the reply is not a GenerateContentResponse: %v", sdk.ErrMalformedReply, err)
	}
	return sdk.TransportFailure(ctx, err)
}
