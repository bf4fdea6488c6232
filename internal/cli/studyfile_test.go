package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

// The bundled study files parse strictly and describe the cross product they say they do.
func TestBundledStudyFilesParse(t *testing.T) {
	for file, strategies := range map[string]int{"ci.yaml": 2, "strategies.yaml": 6} {
		f, err := readStudyFile(filepath.Join("..", "..", "examples", "studies", file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !f.arms() || len(f.Strategies) != strategies {
			t.Errorf("%s: %d strategies, want %d", file, len(f.Strategies), strategies)
		}
		refs, err := plainRefs("strategy", f.Strategies)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, r := range refs {
			if r.Name == "" || !strings.HasPrefix(r.Ref, "strategy/") {
				t.Errorf("%s: strategy %+v has no label or plugin", file, r)
				continue
			}
			// Each strategy's settings are ones its plugin accepts (the file is run as it is).
			mk, ok := builtins[r.Ref]
			if !ok {
				t.Errorf("%s: %s is not a built-in strategy", file, r.Ref)
				continue
			}
			raw := r.Config
			if len(raw) == 0 {
				raw = json.RawMessage("{}")
			}
			if err := mk().Configure(context.Background(), sdk.Configuration{Raw: raw}); err != nil {
				t.Errorf("%s: strategy %s refuses its settings %s: %v", file, r.Name, raw, err)
			}
		}
	}
}

// Every mistake in a study file is an error naming the file, and for an unknown key its line and
// the key of the same section probably meant.
func TestStudyFileMistakes(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, body string
		want       []string
	}{
		{"task key", "tasks:\n  idz: [kbp/l1/relu]\nmodel: {name: replay}\n", []string{"line 2", `unknown key "idz"`, `did you mean "tasks.ids"`}},
		{"strategy key", "tasks: [kbp/l1/relu]\nmodel: {name: replay}\nstrategies:\n  - name: a\n    ref: oneshot\n    confg: {}\n",
			[]string{"line 6", `unknown key "confg"`, `did you mean "strategies.config"`}},
		{"budget key", "tasks: [a]\nbudget:\n  costusd: 3\n", []string{"line 3", `unknown key "costusd"`, `did you mean "budget.cost_usd"`}},
		{"top key", "tasks: [a]\nstudy_budjet: {seconds: 3}\n", []string{"line 2", `did you mean "study_budget"`}},
		{"one and several", "tasks: [a]\nseed: 1\nseeds: [1, 2]\n", []string{"seed and seeds both given"}},
		{"twice the same label", "tasks: [a]\nstrategies:\n  - {name: oneshot}\n  - {name: oneshot, config: {variant: few-shot}}\n", nil},
		{"nameless", "tasks: [a]\nbackends:\n  - config: {}\n", []string{"backends[0] names no plugin"}},
		{"wrong type", "tasks: [a]\nparallel: many\n", []string{"cannot unmarshal"}},
		{"tasks neither list nor mapping", "tasks: kbp/l1/relu\n", []string{"a list of ids or a mapping"}},
		{"negative budget", "tasks: [a]\nbudget: {tokens: -1}\n", []string{"negative"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, dir, "s.yaml", tc.body)
			f, err := readStudyFile(file)
			if err == nil && tc.want == nil {
				// A duplicate label is caught when the references are made.
				_, err = plainRefs("strategy", f.Strategies)
				if err == nil || !strings.Contains(err.Error(), "listed twice") {
					t.Fatalf("duplicate label accepted: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range append([]string{"s.yaml"}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}
