// Package kernellang builds a backend plugin out of a kernel language's files: its prompts (text
// templates), its static rules (a YAML list) and its build recipe. Extraction and the rule engine
// are shared (sdk/extract, sdk/rules), so a new language is a new plugin binary holding a few
// files and a recipe, nothing more. docs/backends.md walks through one.
package kernellang

import (
	"context"
	"fmt"
	"io/fs"
	"slices"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/extract"
	"github.com/kbplatform/kbplatform/sdk/rules"
)

// Language is what a backend plugin supplies.
type Language struct {
	Name        string // the plugin's name: cuda, triton, cutlass, cpp
	Display     string // the language as prompts name it: CUDA, Triton, ...
	Version     string
	Description string
	// Device is the kind of device the kernels run on (cuda or cpu): it picks the hardware facts
	// the hardware-aware prompt shows.
	Device string
	// Prompts holds system.txt, instructions.md, example.md, fewshot.md and hardware.md.
	Prompts fs.FS
	// Rules is the rule file (YAML), parsed once by New.
	Rules []byte
}

// Settings every language backend accepts.
type Settings struct {
	// Python runs the static analysis (default $KBP_PYTHON, then python3); torch is not needed.
	Python string `json:"python,omitempty"`
}

// SettingsSchema is the JSON Schema property of Settings, for a plugin's ConfigSchema.
const SettingsSchema = `"python": {"type": "string", "description": "interpreter for the static analysis (default $KBP_PYTHON, then python3)"}`

// Backend implements everything of sdk.Backend but the build recipe, which is the language's own.
type Backend struct {
	lang     Language
	prompts  *prompts
	rules    *rules.Set
	analyzer rules.Analyzer
}

// New checks a language's files and returns its backend; broken files are the plugin's bug.
func New(lang Language) (*Backend, error) {
	p, err := loadPrompts(lang.Prompts)
	if err != nil {
		return nil, fmt.Errorf("%s prompts: %w", lang.Name, err)
	}
	set, err := rules.Parse(lang.Rules)
	if err != nil {
		return nil, fmt.Errorf("%s %w", lang.Name, err)
	}
	return &Backend{lang: lang, prompts: p, rules: set}, nil
}

// MustNew is New for a plugin's own embedded files.
func MustNew(lang Language) *Backend {
	b, err := New(lang)
	if err != nil {
		panic(err)
	}
	return b
}

// Info identifies the plugin; a backend with settings beyond Settings replaces ConfigSchema.
func (b *Backend) Info() sdk.Info {
	caps := append([]string{"device:" + b.lang.Device}, sdk.Variants()...)
	return sdk.Info{Kind: sdk.KindBackend, Name: b.lang.Name, Version: b.lang.Version, Description: b.lang.Description,
		Capabilities: caps, ConfigSchema: `{"type": "object", "properties": {` + SettingsSchema + `}, "additionalProperties": false}`}
}

// Configure reads Settings.
func (b *Backend) Configure(_ context.Context, c sdk.Configuration) error {
	var s Settings
	if err := c.Decode(&s); err != nil {
		return err
	}
	b.Use(s)
	return nil
}

// Use applies settings (for backends that decode a larger settings struct themselves).
func (b *Backend) Use(s Settings) { b.analyzer = rules.Analyzer{Python: s.Python} }

// Extract returns the file defining ModelNew in a reply, or an error wrapping sdk.ErrNoCode.
func (b *Backend) Extract(_ context.Context, text string) (string, error) {
	return extract.Source(text)
}

// Check runs the language's static rules.
func (b *Backend) Check(ctx context.Context, source string, task sdk.Task) ([]sdk.Issue, error) {
	return rules.Checker{Rules: b.rules, Analyzer: b.analyzer}.Check(ctx, source, task)
}

// Rules returns the language's rules in file order.
func (b *Backend) Rules() []rules.Rule { return b.rules.Rules() }

// Prompt builds the conversation for a task.
func (b *Backend) Prompt(_ context.Context, req sdk.PromptRequest) ([]sdk.Message, error) {
	variant := req.Variant
	if variant == "" {
		variant = sdk.VariantOneShot
	}
	if !slices.Contains(sdk.Variants(), variant) {
		return nil, fmt.Errorf("%w: prompt variant %q (known: %v)", sdk.ErrInvalidArgument, req.Variant, sdk.Variants())
	}
	if req.Task.Source == "" {
		return nil, fmt.Errorf("%w: the task has no source", sdk.ErrInvalidArgument)
	}
	user, err := b.prompts.render(b.lang, variant, req)
	if err != nil {
		return nil, err
	}
	msgs := []sdk.Message{{Role: "system", Content: b.prompts.system}}
	msgs = append(msgs, req.History...)
	return append(msgs, sdk.Message{Role: "user", Content: user}), nil
}
