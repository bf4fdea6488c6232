package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kbplatform/kbplatform/internal/gateway"
	"github.com/kbplatform/kbplatform/internal/study"
)

// modelSettings are the model sections of kbplatform.yaml (docs/models.md): named model
// configurations, the price table and the retry policy. They are read from the file itself,
// not through viper, because viper folds keys to lower case and a provider's extra_body
// fields may be case-sensitive.
type modelSettings struct {
	Models map[string]namedModel `yaml:"models"`
	Prices gateway.Prices        `yaml:"prices"`
	Retry  *gateway.Retry        `yaml:"model_retry"`
}

// namedModel is one endpoint a study can name: `--model vllm:qwen-coder`.
type namedModel struct {
	Plugin string         `yaml:"plugin"`
	Config map[string]any `yaml:"config"`
	Limits gateway.Limits `yaml:"limits"`
	Price  *gateway.Price `yaml:"price"`
}

// loadModelSettings reads the model sections of the configuration file in use (none: empty).
func (a *app) loadModelSettings() (*modelSettings, error) {
	ms := &modelSettings{}
	path := a.cfg.ConfigFile
	if path == "" {
		return ms, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// Only these sections: the rest of the file is viper's.
	var all map[string]yaml.Node
	if err := yaml.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	decode := func(key string, v any) error {
		n, ok := all[key]
		if !ok {
			return nil
		}
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		if err := enc.Encode(&n); err != nil {
			return err
		}
		dec := yaml.NewDecoder(&buf)
		dec.KnownFields(true)
		if err := dec.Decode(v); err != nil {
			return fmt.Errorf("%s: %s: %w", path, key, err)
		}
		return nil
	}
	if err := decode("models", &ms.Models); err != nil {
		return nil, err
	}
	if err := decode("prices", &ms.Prices); err != nil {
		return nil, err
	}
	if err := decode("model_retry", &ms.Retry); err != nil {
		return nil, err
	}
	for name, m := range ms.Models {
		if m.Plugin == "" {
			return nil, fmt.Errorf("%s: models.%s: plugin is required (openai, anthropic, gemini, replay, ...)", path, name)
		}
	}
	return ms, nil
}

// modelRef resolves --model and --model-config: a named configuration (vllm:qwen-coder), a
// plugin with a model name (openai:gpt-5, the same as --model openai with "model": "gpt-5"),
// or a plugin. Keys of --model-config override those of a named configuration.
func (ms *modelSettings) modelRef(name string, cfg json.RawMessage) (study.PluginRef, error) {
	var over map[string]any
	if len(cfg) > 0 {
		if err := json.Unmarshal(cfg, &over); err != nil {
			return study.PluginRef{}, fmt.Errorf("model config: %w", err)
		}
	}
	merged := map[string]any{}
	plugin, label := name, ""
	if nm, ok := ms.Models[name]; ok {
		plugin, label = nm.Plugin, name
		for k, v := range nm.Config {
			merged[k] = v
		}
	} else if p, model, ok := strings.Cut(name, ":"); ok && !strings.Contains(p, "/") {
		plugin, label = p, name
		merged["model"] = model
	}
	for k, v := range over {
		merged[k] = v
	}
	if !strings.Contains(plugin, "/") {
		plugin = "model/" + plugin
	}
	ref := study.PluginRef{Ref: plugin, Name: label}
	if len(merged) > 0 || cfg != nil {
		b, err := json.Marshal(merged)
		if err != nil {
			return study.PluginRef{}, err
		}
		ref.Config = b
	}
	return ref, nil
}

// gatewayOptions are the host-side settings of a study's model.
func (ms *modelSettings) gatewayOptions(noCache bool) func(study.PluginRef) gateway.Options {
	return func(ref study.PluginRef) gateway.Options {
		o := gateway.Options{Retry: gateway.DefaultRetry(), NoCache: noCache, Prices: gateway.Prices{}}
		if ms.Retry != nil {
			o.Retry = *ms.Retry
		}
		for k, v := range ms.Prices {
			o.Prices[k] = v
		}
		if nm, ok := ms.Models[ref.Name]; ok {
			o.Limits = nm.Limits
			if nm.Price != nil {
				o.Prices[ref.Name] = *nm.Price
			}
		}
		return o
	}
}

// keyVariables lists the api_key_env of the models and of every named configuration: variables
// that only the model plugin naming one receives, whatever their names.
func (ms *modelSettings) keyVariables(refs []study.PluginRef) []string {
	var out []string
	add := func(cfg map[string]any) {
		if v, ok := cfg["api_key_env"].(string); ok && v != "" {
			out = append(out, v)
		}
	}
	for _, nm := range ms.Models {
		add(nm.Config)
	}
	for _, r := range refs {
		var cfg map[string]any
		_ = json.Unmarshal(r.Config, &cfg)
		add(cfg)
	}
	return out
}
