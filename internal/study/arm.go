package study

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Arm is one point of a study's cross product: a model, a backend, a strategy with its settings,
// a target and a seed. A unit is an arm on one task.
type Arm struct {
	Model    PluginRef `json:"model"`
	Backend  PluginRef `json:"backend"`
	Strategy PluginRef `json:"strategy"`
	Target   PluginRef `json:"target"`
	Seed     int64     `json:"seed"`
}

// Key is a hash of the arm's canonical JSON (settings with sorted keys): the same arm has the
// same key in every run and every process, which is what makes units resumable.
func (a Arm) Key() string {
	c := a
	for _, r := range []*PluginRef{&c.Model, &c.Backend, &c.Strategy, &c.Target} {
		r.Config = canonical(r.Config)
	}
	b, _ := json.Marshal(c)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:16]
}

// Parts are the labels the arm's records carry (store.AttemptRecord: Model, Backend, Strategy,
// Target).
func (a Arm) Parts() (model, backend, strategy, target string) {
	return a.Model.Label(), a.Backend.Label(), a.Strategy.Label(), a.Target.Label()
}

// legacy reports whether the spec is of the one-arm (or several-model) form that came before
// arms: its id and unit keys stay what they were, so stores of that time resume.
func (s Spec) legacy() bool {
	return len(s.Backends) == 0 && len(s.Strategies) == 0 && len(s.Targets) == 0 && len(s.Seeds) == 0
}

// Arms lists the cross product in a fixed order: models, then backends, strategies, targets and
// seeds, the last varying fastest.
func (s Spec) Arms() []Arm {
	or := func(list []PluginRef, one PluginRef) []PluginRef {
		if len(list) > 0 {
			return list
		}
		return []PluginRef{one}
	}
	seeds := s.Seeds
	if len(seeds) == 0 {
		seeds = []int64{s.Seed}
	}
	var out []Arm
	for _, m := range s.ModelRefs() {
		for _, b := range or(s.Backends, s.Backend) {
			for _, st := range or(s.Strategies, s.Strategy) {
				for _, t := range or(s.Targets, s.Target) {
					for _, seed := range seeds {
						out = append(out, Arm{Model: m, Backend: b, Strategy: st, Target: t, Seed: seed})
					}
				}
			}
		}
	}
	return out
}

// UnitKey names a unit of the study: the arm's key and the task id; in a spec of the form before
// arms, the task alone (one model) or "task @ model", as stores of that time have them.
func (s Spec) UnitKey(a Arm, task string) string {
	if s.legacy() {
		if len(s.Models) == 0 {
			return task
		}
		return task + " @ " + a.Model.Label()
	}
	return a.Key() + "/" + task
}

// ArmLabels names each arm by what sets it apart from the study's other arms (its model in a
// study that compares models, its strategy's name in one that compares strategies, ...): short
// and human-readable, unique within the study. A study of one arm has the label "".
func (s Spec) ArmLabels() []string {
	arms := s.Arms()
	out := make([]string, len(arms))
	if len(arms) < 2 {
		return out
	}
	vary := [5]bool{}
	parts := func(a Arm) [5]string {
		m, b, st, t := a.Parts()
		return [5]string{m, b, st, t, fmt.Sprintf("seed %d", a.Seed)}
	}
	first := parts(arms[0])
	for _, a := range arms[1:] {
		p := parts(a)
		for i := range p {
			vary[i] = vary[i] || p[i] != first[i]
		}
	}
	for i, a := range arms {
		p := parts(a)
		var l []string
		for j := range p {
			if vary[j] {
				l = append(l, p[j])
			}
		}
		out[i] = strings.Join(l, " · ")
		if out[i] == "" {
			// Two arms that differ only in settings under the same names: the key tells them apart.
			out[i] = a.Key()[:8]
		}
	}
	seen := map[string]int{}
	for _, l := range out {
		seen[l]++
	}
	for i, l := range out {
		if seen[l] > 1 {
			out[i] = l + " [" + arms[i].Key()[:8] + "]"
		}
	}
	return out
}
