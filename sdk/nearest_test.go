package sdk

import (
	"errors"
	"strings"
	"testing"
)

func TestNearest(t *testing.T) {
	known := []string{"db", "device", "size", "contract.seeds", "contract.timed_calls", "source", "backend"}
	tests := []struct{ word, want string }{
		{"devcie", "device"},
		{"sedes", "contract.seeds"},
		{"contract.sedes", "contract.seeds"},
		{"contract.timedcalls", "contract.timed_calls"},
		{"sorce", "source"},
		{"completely_unrelated", ""},
	}
	for _, tc := range tests {
		t.Run(tc.word, func(t *testing.T) {
			if got := Nearest(tc.word, known); got != tc.want {
				t.Errorf("Nearest(%q) = %q, want %q", tc.word, got, tc.want)
			}
		})
	}
}

func TestDecodeNamesTheKey(t *testing.T) {
	type settings struct {
		Source  string `json:"source"`
		Backend string `json:"backend,omitempty"`
		N       int    `json:"n"`
	}
	tests := []struct {
		raw  string
		want []string
	}{
		{`{"sorce":"examples"}`, []string{`unknown key "sorce"`, `did you mean "source"`, "known keys: source, backend, n"}},
		{`{"n":"five"}`, []string{`key "n"`, "string", "int"}},
		{`{"source":"x"}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			var s settings
			err := Configuration{Raw: []byte(tc.raw)}.Decode(&s)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("got %v, want ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

// Embedded settings (a strategy's shared prompting keys, a model's common keys) are listed by
// their own keys, as encoding/json reads them, not by the embedded type's name.
func TestDecodeNamesEmbeddedKeys(t *testing.T) {
	type Common struct {
		Variant     string  `json:"variant"`
		Temperature float64 `json:"temperature"`
	}
	type settings struct {
		Common
		Step float64 `json:"temperature_step"`
	}
	var s settings
	err := Configuration{Raw: []byte(`{"temprature": 1}`)}.Decode(&s)
	if err == nil || !strings.Contains(err.Error(), "known keys: variant, temperature, temperature_step") ||
		!strings.Contains(err.Error(), `did you mean "temperature"`) {
		t.Errorf("got %v", err)
	}
}
