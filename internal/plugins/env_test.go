package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

func TestPluginEnv(t *testing.T) {
	environ := []string{"PATH=/bin", "OPENAI_API_KEY=sk-1", "KBP_PYTHON=/usr/bin/python3", "KBP_CLUSTER_PASSWORD=pw",
		"MY_ENDPOINT=k-2", "AWS_ACCESS_KEY_ID=AKIA", "HOME=/h"}
	secrets := []string{"MY_ENDPOINT"}
	for _, tc := range []struct {
		name  string
		grant []string
		want  []string
	}{
		{"nothing granted", nil, []string{"PATH=/bin", "KBP_PYTHON=/usr/bin/python3", "HOME=/h", "EXTRA=1"}},
		{"a key by its name", []string{"OPENAI_API_KEY"}, []string{"PATH=/bin", "OPENAI_API_KEY=sk-1", "KBP_PYTHON=/usr/bin/python3", "HOME=/h", "EXTRA=1"}},
		{"a listed secret", []string{"MY_ENDPOINT"}, []string{"PATH=/bin", "KBP_PYTHON=/usr/bin/python3", "MY_ENDPOINT=k-2", "HOME=/h", "EXTRA=1"}},
		{"a KBP_ secret", []string{"KBP_CLUSTER_PASSWORD"}, []string{"PATH=/bin", "KBP_PYTHON=/usr/bin/python3", "KBP_CLUSTER_PASSWORD=pw", "HOME=/h", "EXTRA=1"}},
		{"a variable that is not set", []string{"ANTHROPIC_API_KEY"}, []string{"PATH=/bin", "KBP_PYTHON=/usr/bin/python3", "HOME=/h", "EXTRA=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pluginEnv(environ, []string{"EXTRA=1"}, secrets, tc.grant)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if len(environ) != 7 || environ[1] != "OPENAI_API_KEY=sk-1" {
		t.Errorf("the host's environment was changed: %v", environ)
	}
}

func TestGrants(t *testing.T) {
	m := New(Options{Grant: func(spec Spec, _ json.RawMessage) []string {
		if spec.Ref() == "model/openai" {
			return []string{"OPENAI_API_KEY"}
		}
		return nil
	}})
	for _, tc := range []struct {
		ref, config string
		want        []string
	}{
		{"model/x", `{"api_key_env": "DEEPSEEK_API_KEY"}`, []string{"DEEPSEEK_API_KEY"}},
		{"model/x", `{}`, nil},
		{"model/x", `{"api_key_env": 3}`, nil},
		{"model/openai", `{"api_key_env": "DEEPSEEK_API_KEY"}`, []string{"DEEPSEEK_API_KEY", "OPENAI_API_KEY"}},
		{"backend/cuda", `{"api_key_env": "OPENAI_API_KEY"}`, nil}, // only a model reads a key
	} {
		t.Run(tc.ref+tc.config, func(t *testing.T) {
			kind, name, _ := strings.Cut(tc.ref, "/")
			got := m.grants(Spec{Kind: kind, Name: name}, json.RawMessage(tc.config))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// envModel is a model that accepts any settings and says in its Info which of its variables
// hold a credential, as the process itself sees them.
type envModel struct{}

func (envModel) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindModel, Name: "envmodel", Version: "1.0.0", Description: strings.Join(heldSecrets(os.Environ()), ",")}
}
func (envModel) Configure(context.Context, sdk.Configuration) error { return nil }
func (envModel) Generate(context.Context, sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	return &sdk.GenerateResponse{Completions: []sdk.Completion{{Text: "ok"}}}, nil
}

// envSecrets are in the host's environment in TestPluginProcessesHoldOnlyGrantedSecrets; their
// values share a prefix so that a process can be searched for them.
var envSecrets = map[string]string{
	"OPENAI_API_KEY":        "kbp-envtest-1",
	"ANTHROPIC_API_KEY":     "kbp-envtest-2",
	"KBP_TEST_SECRET_TOKEN": "kbp-envtest-3",
	"MY_ENDPOINT":           "kbp-envtest-4", // a key whose name does not say so: listed in Secrets
}

// heldSecrets lists the names in environ whose value is one of envSecrets.
func heldSecrets(environ []string) []string {
	out := []string{}
	for _, kv := range environ {
		if name, value, _ := strings.Cut(kv, "="); strings.HasPrefix(value, "kbp-envtest-") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// procSecrets reads the secrets in a live process's environment from /proc.
func procSecrets(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatalf("environment of %d: %v", pid, err)
	}
	return heldSecrets(strings.Split(string(b), "\x00"))
}

// The manager's own guarantee, on real processes: with four secrets in the host's environment,
// a plugin process holds only what was granted to its instance, after a restart too, and a
// plugin started only to read its identity holds none.
func TestPluginProcessesHoldOnlyGrantedSecrets(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("needs /proc")
	}
	for k, v := range envSecrets {
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	install(t, dir, "model", "envmodel", "env-model")
	install(t, dir, "target", "echo-target", "echo-target")
	m := New(Options{Dirs: []string{dir}, LockFile: dir + "/plugins.lock", Secrets: []string{"MY_ENDPOINT"}})
	t.Cleanup(m.Close)
	if _, _, err := m.LockAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, info, err := m.Inspect("model/envmodel")
	if err != nil || info.Description != "" {
		t.Errorf("inspected plugin holds %q (%v)", info.Description, err)
	}
	for _, tc := range []struct {
		ref, config string
		want        []string
	}{
		{"model/envmodel", `{"api_key_env": "ANTHROPIC_API_KEY"}`, []string{"ANTHROPIC_API_KEY"}},
		{"model/envmodel", `{"api_key_env": "MY_ENDPOINT"}`, []string{"MY_ENDPOINT"}},
		{"model/envmodel", `{}`, []string{}},
		{"target/echo-target", `{}`, []string{}},
	} {
		t.Run(tc.ref+tc.config, func(t *testing.T) {
			inst, err := m.Start(context.Background(), tc.ref, json.RawMessage(tc.config), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := procSecrets(t, inst.Pid()); !slices.Equal(got, tc.want) {
				t.Errorf("process holds %v, want %v", got, tc.want)
			}
			if tc.ref != "model/envmodel" {
				return
			}
			if got := inst.Info().Description; got != strings.Join(tc.want, ",") {
				t.Errorf("the plugin sees %q, want %v", got, tc.want)
			}
			inst.Kill()
			if _, err := gen(context.Background(), inst.Model(), "hello"); err != nil {
				t.Fatalf("after the restart: %v", err)
			}
			if got := procSecrets(t, inst.Pid()); inst.Starts() != 2 || !slices.Equal(got, tc.want) {
				t.Errorf("restarted process (start %d) holds %v, want %v", inst.Starts(), got, tc.want)
			}
		})
	}
	t.Run("reconfigured", func(t *testing.T) {
		inst, err := m.Start(context.Background(), "model/envmodel", json.RawMessage(`{}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		before := inst.Pid()
		if err := inst.Model().Configure(context.Background(), sdk.Configuration{Raw: json.RawMessage(`{"api_key_env": "OPENAI_API_KEY"}`)}); err != nil {
			t.Fatal(err)
		}
		if got := procSecrets(t, inst.Pid()); inst.Pid() == before || !slices.Equal(got, []string{"OPENAI_API_KEY"}) {
			t.Errorf("after naming another key: pid %d (was %d) holds %v", inst.Pid(), before, got)
		}
	})
}
