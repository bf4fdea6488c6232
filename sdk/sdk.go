// Package sdk is kbplatform's public plugin SDK: the interfaces a model, backend, strategy or
// target plugin implements, Serve to run one as a plugin process, and the error values that keep
// their identity across the process boundary. docs/plugin-authoring.md walks through each kind.
//
// A plugin is a separate executable named kbplugin-<kind>-<name>. It speaks gRPC to the host
// through hashicorp/go-plugin; the protocol lives in proto/kbplatform/plugin/v1.
package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Protocol is the plugin protocol version this SDK speaks (proto/kbplatform/plugin/v1).
const Protocol = 1

// Version is the SDK's own version, reported to the host.
const Version = "0.1.0"

// Kinds of plugins.
const (
	KindModel    = "model"
	KindBackend  = "backend"
	KindStrategy = "strategy"
	KindTarget   = "target"
)

// Kinds lists every kind.
var Kinds = []string{KindModel, KindBackend, KindStrategy, KindTarget}

// Info identifies a plugin. The host trusts this, not the binary's file name.
type Info struct {
	Kind         string   `json:"kind"`
	Name         string   `json:"name"`
	Version      string   `json:"version"`
	Description  string   `json:"description,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	ConfigSchema string   `json:"config_schema,omitempty"` // JSON Schema of Configure's settings
	Protocol     int      `json:"protocol"`
	SDKVersion   string   `json:"sdk_version,omitempty"`
}

// Configuration is what Configure receives: the user's settings for the plugin as JSON, and the
// host's Platform when the host offers it (nil otherwise).
type Configuration struct {
	Raw      json.RawMessage
	Platform Platform
}

// Decode unmarshals the settings into v, rejecting unknown keys (ErrInvalidConfig).
func (c Configuration) Decode(v any) error {
	raw := bytes.TrimSpace(c.Raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		// Name the key the way the user wrote it, and the one they probably meant.
		if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			key = strings.Trim(key, `"`)
			known := jsonKeys(v)
			msg := fmt.Sprintf("unknown key %q", key)
			if n := Nearest(key, known); n != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", n)
			}
			if len(known) > 0 {
				msg += "; known keys: " + strings.Join(known, ", ")
			} else {
				msg += "; this plugin takes no settings"
			}
			return fmt.Errorf("%w: %s", ErrInvalidConfig, msg)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("%w: key %q: %s is not a %s", ErrInvalidConfig, te.Field, te.Value, te.Type)
		}
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return nil
}

// Plugin is what every kind implements.
type Plugin interface {
	Info() Info
	// Configure is called after every start, before any other call.
	Configure(ctx context.Context, c Configuration) error
}

// NoConfig gives a plugin without settings its Configure: it accepts {} and nothing else.
type NoConfig struct{}

// Configure rejects any setting.
func (NoConfig) Configure(_ context.Context, c Configuration) error {
	var none struct{}
	return c.Decode(&none)
}

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"` // system, user, assistant
	Content string `json:"content"`
}

// SamplingParams tune generation; nil pointers mean the provider's default.
type SamplingParams struct {
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	MaxTokens   int      `json:"max_tokens,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	Stop        []string `json:"stop,omitempty"`
}

// GenerateRequest asks for N completions of a conversation.
type GenerateRequest struct {
	Messages []Message      `json:"messages"`
	N        int            `json:"n"`
	Params   SamplingParams `json:"params"`
	TaskID   string         `json:"task_id,omitempty"`
}

// Completion is one reply.
type Completion struct {
	Text         string `json:"text"`
	FinishReason string `json:"finish_reason,omitempty"`
	// Reasoning is the model's thinking (reasoning_content, thinking blocks), kept apart from
	// Text so that code extraction never sees it.
	Reasoning string `json:"reasoning,omitempty"`
}

// Usage counts tokens.
type Usage struct {
	PromptTokens       int64 `json:"prompt_tokens"`
	CompletionTokens   int64 `json:"completion_tokens"`
	ReasoningTokens    int64 `json:"reasoning_tokens,omitempty"`     // included in CompletionTokens
	CachedPromptTokens int64 `json:"cached_prompt_tokens,omitempty"` // included in PromptTokens
}

// GenerateResponse carries the completions.
type GenerateResponse struct {
	Completions []Completion `json:"completions"`
	Usage       Usage        `json:"usage"`
	Model       string       `json:"model,omitempty"`
	// CallIDs are set by the host: the recorded calls behind the reply. A strategy copies them
	// into the Attempt it records so that each attempt links to the calls that produced it.
	CallIDs []string `json:"call_ids,omitempty"`
}

// Model is a provider of completions.
type Model interface {
	Plugin
	Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error)
}

// Device is one device of a target.
type Device struct {
	Name              string `json:"name"` // cpu, cuda:0
	Kind              string `json:"kind"` // cpu, cuda
	Model             string `json:"model,omitempty"`
	MemoryBytes       int64  `json:"memory_bytes,omitempty"`
	ComputeCapability string `json:"compute_capability,omitempty"`
	Multiprocessors   int    `json:"multiprocessors,omitempty"`
	Driver            string `json:"driver,omitempty"`
}

// Hardware describes a target.
type Hardware struct {
	Target       string      `json:"target"`
	Devices      []Device    `json:"devices"`
	Fingerprint  Fingerprint `json:"fingerprint,omitempty"`
	Capabilities []string    `json:"capabilities,omitempty"`
}

// BuildRecipe is what a target needs to build a backend's kernels.
type BuildRecipe struct {
	Env          map[string]string `json:"env,omitempty"`
	CFlags       []string          `json:"cflags,omitempty"`
	CUDAFlags    []string          `json:"cuda_cflags,omitempty"`
	IncludePaths []string          `json:"include_paths,omitempty"`
	LDFlags      []string          `json:"ldflags,omitempty"`
}

// Issue is a static-check finding. An error rejects the candidate before it is built; a warning
// is recorded with the evaluation. Flag names the result flag the finding raises, if any.
type Issue struct {
	Severity string `json:"severity"` // error, warning
	Code     string `json:"code"`
	Message  string `json:"message"`
	Flag     string `json:"flag,omitempty"`
}

// Severities.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Prompt variants every backend understands.
const (
	VariantOneShot       = "one-shot"
	VariantFewShot       = "few-shot"
	VariantHardwareAware = "hardware-aware"
	// VariantChainOfThought asks the model to reason about the task before it writes code.
	VariantChainOfThought = "chain-of-thought"
)

// Variants lists the prompt variants in the order they are documented.
func Variants() []string {
	return []string{VariantOneShot, VariantFewShot, VariantHardwareAware, VariantChainOfThought}
}

// PromptRequest asks a backend for the conversation that requests a kernel for a task.
type PromptRequest struct {
	Task     Task      `json:"task"`
	Variant  string    `json:"variant"`
	Hardware *Hardware `json:"hardware,omitempty"`
	Feedback string    `json:"feedback,omitempty"`
	History  []Message `json:"history,omitempty"`
}

// Backend is one kernel language.
type Backend interface {
	Plugin
	Prompt(ctx context.Context, req PromptRequest) ([]Message, error)
	// Extract returns the candidate source in a reply, or ErrNoCode.
	Extract(ctx context.Context, text string) (string, error)
	Check(ctx context.Context, source string, task Task) ([]Issue, error)
	Recipe(ctx context.Context, hw *Hardware) (*BuildRecipe, error)
}

// Progress receives human-readable progress messages.
type Progress func(msg string)

// CompileRequest asks a target to build a candidate.
type CompileRequest struct {
	Task   Task         `json:"task"`
	Kernel Kernel       `json:"kernel"`
	Device string       `json:"device"`
	Recipe *BuildRecipe `json:"recipe,omitempty"`
}

// EvaluateRequest asks a target to run the contract.
type EvaluateRequest struct {
	Task     Task           `json:"task"`
	Kernel   Kernel         `json:"kernel"`
	Device   string         `json:"device"`
	Config   Config         `json:"config"`
	Compiled *CompileResult `json:"compiled,omitempty"`
	Recipe   *BuildRecipe   `json:"recipe,omitempty"`
}

// BaselineRequest asks a target to time the task's own Model in a mode.
type BaselineRequest struct {
	Task   Task   `json:"task"`
	Device string `json:"device"`
	Mode   string `json:"mode"`
	Config Config `json:"config"`
}

// Target runs the contract on some hardware.
type Target interface {
	Plugin
	Describe(ctx context.Context) (*Hardware, error)
	Compile(ctx context.Context, req CompileRequest) (*CompileResult, error)
	Evaluate(ctx context.Context, req EvaluateRequest, progress Progress) (*Result, error)
	Baseline(ctx context.Context, req BaselineRequest, progress Progress) (*Result, error)
	Validate(ctx context.Context, task Task, device string, cfg Config) (*Validation, error)
}

// Budget limits one strategy run (0: unlimited). The host enforces it: calls past it fail with
// ErrBudgetExhausted.
type Budget struct {
	Generations int     `json:"generations"`
	Evaluations int     `json:"evaluations"`
	Tokens      int64   `json:"tokens,omitempty"`   // prompt + completion tokens
	Seconds     float64 `json:"seconds,omitempty"`  // wall time of the run
	CostUSD     float64 `json:"cost_usd,omitempty"` // model spend in dollars
}

// RunRequest starts a strategy on one task.
type RunRequest struct {
	Task   Task   `json:"task"`
	Budget Budget `json:"budget"`
	Seed   int64  `json:"seed"`
	Study  string `json:"study"`
}

// RunResult summarises a run.
type RunResult struct {
	Attempts       int    `json:"attempts"`
	BestEvaluation string `json:"best_evaluation,omitempty"`
	Note           string `json:"note,omitempty"`
}

// Attempt is one step of a strategy's search, as recorded in the store.
type Attempt struct {
	Step             int    `json:"step"`
	ParentStep       int    `json:"parent_step"` // -1: none
	EvaluationID     string `json:"evaluation_id,omitempty"`
	KernelHash       string `json:"kernel_hash,omitempty"`
	Completion       string `json:"completion,omitempty"`
	FeedbackKind     string `json:"feedback_kind,omitempty"`
	Note             string `json:"note,omitempty"`
	PromptTokens     int64  `json:"prompt_tokens,omitempty"`
	CompletionTokens int64  `json:"completion_tokens,omitempty"`
	// CallIDs are the model calls behind Completion (GenerateResponse.CallIDs).
	CallIDs []string `json:"call_ids,omitempty"`
	// Failure classifies a generation that gave no usable reply (FailureClass of its error).
	Failure string `json:"failure,omitempty"`
	// Turn is the refinement turn (0: the first prompt) and Sample which of the turn's
	// candidates this is: fast_p@N by turn and @k over samples are read from them.
	Turn   int `json:"turn,omitempty"`
	Sample int `json:"sample,omitempty"`
	// Feedback is the feedback text the attempt's prompt carried; Prompt the messages sent.
	Feedback    string    `json:"feedback,omitempty"`
	Prompt      []Message `json:"prompt,omitempty"`
	Temperature float64   `json:"temperature,omitempty"`
}

// Evaluation is a stored evaluation as the Platform returns it.
type Evaluation struct {
	ID     string  `json:"id"`
	Result *Result `json:"result"`
	Issues []Issue `json:"issues,omitempty"`
}

// Platform is the host as a strategy (or any plugin offered it) sees it. During a strategy run it
// is bound to the run's task, model, backend and target.
type Platform interface {
	Prompt(ctx context.Context, variant, feedback string, history []Message) ([]Message, error)
	Extract(ctx context.Context, text string) (string, error)
	Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error)
	Evaluate(ctx context.Context, source, name string) (*Evaluation, error)
	Record(ctx context.Context, a Attempt) (string, error)
	Kernels(ctx context.Context, taskID string, limit int) ([]Kernel, error)
	// StoredKernels is Kernels with more ways to choose: one study's kernels, passed ones only.
	StoredKernels(ctx context.Context, q KernelQuery) ([]Kernel, error)
}

// KernelQuery selects stored kernels of a task.
type KernelQuery struct {
	Task   string `json:"task"`
	Study  string `json:"study,omitempty"`  // only kernels evaluated in this study (id or unique prefix)
	Passed bool   `json:"passed,omitempty"` // only kernels that passed
	Limit  int    `json:"limit,omitempty"`  // 0: all
}

// Strategy searches for a kernel for one task.
type Strategy interface {
	Plugin
	Run(ctx context.Context, req RunRequest, p Platform) (*RunResult, error)
}
