// Package search is what the built-in strategies share: one turn of asking, extracting,
// evaluating and recording candidates; the ranking that says which kernel is best; and the
// settings every strategy takes (prompt variant, chain of thought, temperature).
package search

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
)

// Prompting holds the settings every strategy takes.
type Prompting struct {
	// Variant is the backend's prompt variant (default one-shot).
	Variant string `json:"variant,omitempty"`
	// ChainOfThought asks the model to reason before it writes code: the backends'
	// chain-of-thought variant, so it cannot be combined with another variant.
	ChainOfThought bool     `json:"chain_of_thought,omitempty"`
	Temperature    *float64 `json:"temperature,omitempty"`
	MaxTokens      int      `json:"max_tokens,omitempty"`
}

// PromptingSchema is the JSON schema of Prompting's keys, for a strategy's schema.
const PromptingSchema = `"variant":          {"enum": ["one-shot", "few-shot", "hardware-aware", "chain-of-thought"]},
    "chain_of_thought": {"type": "boolean"},
    "temperature":      {"type": "number", "minimum": 0, "maximum": 2},
    "max_tokens":       {"type": "integer", "minimum": 0}`

// PromptVariant is the variant to ask the backend for, or ErrInvalidConfig.
func (p Prompting) PromptVariant() (string, error) {
	v := p.Variant
	if v != "" && !slices.Contains(sdk.Variants(), v) {
		return "", fmt.Errorf("%w: variant %q (known: %s)", sdk.ErrInvalidConfig, v, strings.Join(sdk.Variants(), ", "))
	}
	if p.ChainOfThought {
		if v != "" && v != sdk.VariantOneShot && v != sdk.VariantChainOfThought {
			return "", fmt.Errorf("%w: chain_of_thought is the %s prompt variant; it cannot be combined with variant %q",
				sdk.ErrInvalidConfig, sdk.VariantChainOfThought, v)
		}
		return sdk.VariantChainOfThought, nil
	}
	if v == "" {
		return sdk.VariantOneShot, nil
	}
	return v, nil
}

// TemperatureOr is the temperature setting, or def when unset; an error outside [0, 2].
func (p Prompting) TemperatureOr(def float64) (float64, error) {
	t := def
	if p.Temperature != nil {
		t = *p.Temperature
	}
	if t < 0 || t > 2 {
		return 0, fmt.Errorf("%w: temperature %g is outside [0, 2]", sdk.ErrInvalidConfig, t)
	}
	return t, nil
}

// Validate checks the settings.
func (p Prompting) Validate() error {
	if _, err := p.PromptVariant(); err != nil {
		return err
	}
	if _, err := p.TemperatureOr(0); err != nil {
		return err
	}
	if p.MaxTokens < 0 {
		return fmt.Errorf("%w: max_tokens must not be negative", sdk.ErrInvalidConfig)
	}
	return nil
}
