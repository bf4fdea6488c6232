package study

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

// The spec as it was before arms: a spec of that form must keep its id, so that a study stored
// then resumes rather than starting afresh.
type specBeforeArms struct {
	Name            string      `json:"name,omitempty"`
	Tasks           []string    `json:"tasks"`
	Size            string      `json:"size"`
	Device          string      `json:"device"`
	Model           PluginRef   `json:"model"`
	Models          []PluginRef `json:"models,omitempty"`
	Backend         PluginRef   `json:"backend"`
	Strategy        PluginRef   `json:"strategy"`
	Target          PluginRef   `json:"target"`
	Budget          sdk.Budget  `json:"budget"`
	Seed            int64       `json:"seed"`
	Contract        sdk.Config  `json:"contract"`
	ContractVersion string      `json:"contract_version,omitempty"`
}

func TestLegacySpecKeepsItsID(t *testing.T) {
	cfg := []byte(`{}`)
	s := Spec{Tasks: []string{"kbp/l1/relu"}, Size: "cpu", Device: "cpu", Model: PluginRef{Ref: "model/replay", Config: cfg},
		Backend: PluginRef{Ref: "backend/cpp", Config: cfg}, Strategy: PluginRef{Ref: "strategy/oneshot", Config: cfg},
		Target: PluginRef{Ref: "target/local", Config: cfg}, Contract: sdk.DefaultConfig(), ContractVersion: "kbp-contract/4"}
	old := specBeforeArms{Tasks: s.Tasks, Size: s.Size, Device: s.Device, Model: s.Model, Backend: s.Backend, Strategy: s.Strategy,
		Target: s.Target, Contract: s.Contract, ContractVersion: s.ContractVersion}
	b, _ := json.Marshal(old)
	h := sha256.Sum256(b)
	if want := hex.EncodeToString(h[:])[:20]; s.ID() != want {
		t.Errorf("id %s, before arms %s", s.ID(), want)
	}
	// The study budget is not part of the id: a study it stopped resumes under a bigger one.
	s.Limit = StudyBudget{CostUSD: 5}
	if s.ID() != hex.EncodeToString(h[:])[:20] {
		t.Error("the study budget changed the id")
	}
	if got := s.UnitKey(s.Arms()[0], "kbp/l1/relu"); got != "kbp/l1/relu" {
		t.Errorf("unit key of a one-arm study: %q", got)
	}
	s.Models = []PluginRef{{Ref: "model/replay"}, {Ref: "model/openai", Name: "openai:gpt-5"}}
	if got := s.UnitKey(s.Arms()[1], "kbp/l1/relu"); got != "kbp/l1/relu @ openai:gpt-5" {
		t.Errorf("unit key of a several-model study: %q", got)
	}
}

// The cross product has one arm per combination, in a fixed order, each with a key of its own
// that formatting of its settings does not change; labels name what sets an arm apart.
func TestArmsAndTheirKeysAndLabels(t *testing.T) {
	s := Spec{Tasks: []string{"a"}, Model: PluginRef{Ref: "model/replay"}, Backend: PluginRef{Ref: "backend/cpp"},
		Strategies: []PluginRef{
			{Ref: "strategy/oneshot", Name: "plain", Config: []byte(`{"variant":"one-shot","temperature":0}`)},
			{Ref: "strategy/oneshot", Name: "few", Config: []byte(`{"variant":"few-shot"}`)},
		},
		Target: PluginRef{Ref: "target/local"}, Seeds: []int64{1, 2}}
	arms := s.Arms()
	if len(arms) != 4 {
		t.Fatalf("%d arms, want 4", len(arms))
	}
	keys := map[string]bool{}
	for _, a := range arms {
		keys[a.Key()] = true
	}
	if len(keys) != 4 {
		t.Fatalf("arm keys collide: %v", keys)
	}
	labels := s.ArmLabels()
	want := []string{"plain · seed 1", "plain · seed 2", "few · seed 1", "few · seed 2"}
	if !slices.Equal(labels, want) {
		t.Errorf("labels %q, want %q", labels, want)
	}
	reformatted := s
	reformatted.Strategies = slices.Clone(s.Strategies)
	reformatted.Strategies[0].Config = []byte(`{ "temperature": 0, "variant": "one-shot" }`)
	if reformatted.Arms()[0].Key() != arms[0].Key() || reformatted.ID() != s.ID() {
		t.Error("formatting of settings changed a key")
	}
	u := s.UnitKey(arms[2], "kbp/l1/relu")
	if !strings.HasPrefix(u, arms[2].Key()+"/") || !strings.HasSuffix(u, "/kbp/l1/relu") {
		t.Errorf("unit key %q", u)
	}
	if _, _, strat, _ := arms[2].Parts(); strat != "few" {
		t.Errorf("strategy label %q, want the name given to its configuration", strat)
	}
	// Two arms under the same names but different settings still get distinct labels.
	s2 := Spec{Tasks: []string{"a"}, Model: PluginRef{Ref: "model/replay"}, Strategies: []PluginRef{
		{Ref: "strategy/oneshot", Config: []byte(`{"variant":"one-shot"}`)}, {Ref: "strategy/oneshot", Config: []byte(`{"variant":"few-shot"}`)}}}
	l2 := s2.ArmLabels()
	if l2[0] == l2[1] {
		t.Errorf("labels collide: %q", l2)
	}
	if (Spec{Tasks: []string{"a"}}).ArmLabels()[0] != "" {
		t.Error("a one-arm study labels its arm")
	}
}
