package plugins

import (
	"slices"
	"testing"
)

func TestPluginEnvHidesSecretsFromOtherKinds(t *testing.T) {
	environ := []string{"PATH=/bin", "OPENAI_API_KEY=sk-1", "KBP_TEST_KEY=sk-2", "HOME=/h"}
	secrets := []string{"OPENAI_API_KEY", "KBP_TEST_KEY"}
	for _, tc := range []struct {
		kind string
		want []string
	}{
		{"model", []string{"PATH=/bin", "OPENAI_API_KEY=sk-1", "KBP_TEST_KEY=sk-2", "HOME=/h", "EXTRA=1"}},
		{"backend", []string{"PATH=/bin", "HOME=/h", "EXTRA=1"}},
		{"strategy", []string{"PATH=/bin", "HOME=/h", "EXTRA=1"}},
		{"target", []string{"PATH=/bin", "HOME=/h", "EXTRA=1"}},
		{"", []string{"PATH=/bin", "HOME=/h", "EXTRA=1"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			got := pluginEnv(environ, []string{"EXTRA=1"}, secrets, tc.kind)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := pluginEnv(environ, nil, secrets, "backend"); len(environ) != 4 || environ[1] != "OPENAI_API_KEY=sk-1" || len(got) != 2 {
		t.Errorf("the host's environment was changed: %v", environ)
	}
}
