package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kbplatform/kbplatform/internal/plugins"
	"github.com/kbplatform/kbplatform/plugins/models/anthropic/anthropictest"
	"github.com/kbplatform/kbplatform/plugins/models/gemini/geminitest"
	"github.com/kbplatform/kbplatform/plugins/models/openai/openaitest"
)

// envTestKeys are secrets in the host's environment; the values share a prefix so that a probe
// in a worker can find them whatever name they travel under.
var envTestKeys = map[string]string{
	"OPENAI_API_KEY":        "kbp-envtest-openai-41f3",
	"ANTHROPIC_API_KEY":     "kbp-envtest-anthropic-9c2d",
	"GEMINI_API_KEY":        "kbp-envtest-gemini-77ab",
	"KBP_TEST_SECRET_TOKEN": "kbp-envtest-token-05e1",
}

// pluginProc is a plugin process as /proc shows it.
type pluginProc struct {
	pid  int
	ref  string   // kind/name from its command line
	keys []string // the names in its environment that hold one of envTestKeys' values
}

// pluginProcs reads every `plugin serve` child of this (the host's) process.
func pluginProcs() []pluginProc {
	var out []pluginProc
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readStat(pid)
		if !ok || st.ppid != os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		i := slices.Index(args, "serve")
		if i < 1 || args[i-1] != "plugin" || i+1 >= len(args) {
			continue
		}
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		p := pluginProc{pid: pid, ref: args[i+1], keys: []string{}}
		for _, kv := range strings.Split(string(environ), "\x00") {
			name, value, _ := strings.Cut(kv, "=")
			for _, secret := range envTestKeys {
				if value == secret {
					p.keys = append(p.keys, name)
				}
			}
		}
		sort.Strings(p.keys)
		out = append(out, p)
	}
	return out
}

// The hostile case behind SkipHostEnv: a study whose host holds four secrets, with an openai
// endpoint that names its key, one that names none (a local server), anthropic and gemini on
// their default keys. While each model is asked, every plugin process of the study is read from
// /proc: a model plugin holds exactly the key its settings name, every other plugin none. The
// openai endpoint answers with a kernel that reports the secrets its build worker can see.
func TestPluginProcessesHoldOnlyTheirOwnKeys(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]pluginProc{}
	snapshot := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range pluginProcs() {
			seen[p.pid] = p
		}
	}
	probe := "import os\n" +
		"_seen = sorted(k for k, v in os.environ.items() if v.startswith('kbp-envtest-'))\n" +
		"raise RuntimeError('worker environment holds [' + ','.join(_seen) + ']')\n" +
		"import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
	oai := openaitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
		snapshot()
		openaitest.Completion(w, nil, "```python\n"+probe+"```")
	})
	ant := anthropictest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
		snapshot()
		anthropictest.Message(w, "end_turn", anthropictest.Text("no code today"))
	})
	gem := geminitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
		snapshot()
		geminitest.Respond(w, geminitest.Stop("STOP", geminitest.Text("no code today")))
	})
	env := isolated(t)
	for k, v := range envTestKeys {
		env[k] = v
	}
	cfgFile := filepath.Join(t.TempDir(), "kbplatform.yaml")
	yaml := fmt.Sprintf(`models:
  gpt:
    plugin: openai
    config: {base_url: %q, model: m, api_key_env: OPENAI_API_KEY}
  local:
    plugin: openai
    config: {base_url: %q, model: m-local}
  claude:
    plugin: anthropic
    config: {base_url: %q, model: c}
  gem:
    plugin: gemini
    config: {base_url: %q, model: g}
`, oai.BaseURL(), oai.BaseURL(), ant.URL, gem.URL)
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	env["KBP_CONFIG"] = cfgFile
	out, errOut, code := run(t, env, "study", "run", "--model", "gpt", "--model", "local", "--model", "claude", "--model", "gem",
		"--backend", "cpp", "--strategy", "oneshot", "--tasks", "kbp/l1/relu", "--device", "cpu", "--seeds", "1",
		"--timed-calls", "10", "--warmup", "1", "--check-calls", "2")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	// The endpoints got the keys: the models could still work.
	if oai.Requests() != 2 || ant.Requests() != 1 || gem.Requests() != 1 {
		t.Fatalf("requests: openai %d, anthropic %d, gemini %d\n%s\n%s", oai.Requests(), ant.Requests(), gem.Requests(), out, errOut)
	}
	auths := []string{oai.Auth(0), oai.Auth(1)}
	sort.Strings(auths)
	if want := []string{"", "Bearer " + envTestKeys["OPENAI_API_KEY"]}; !slices.Equal(auths, want) {
		t.Errorf("openai credentials %q, want %q", auths, want)
	}
	if ant.Key(0) != envTestKeys["ANTHROPIC_API_KEY"] || gem.Key(0) != envTestKeys["GEMINI_API_KEY"] {
		t.Errorf("anthropic sent %q, gemini %q", ant.Key(0), gem.Key(0))
	}

	byRef := map[string][][]string{}
	for _, p := range seen {
		byRef[p.ref] = append(byRef[p.ref], p.keys)
	}
	for _, ref := range []string{"target/local", "backend/cpp", "strategy/oneshot"} {
		if len(byRef[ref]) == 0 {
			t.Errorf("no %s process was seen", ref)
		}
	}
	for ref, keySets := range byRef {
		sort.Slice(keySets, func(a, b int) bool { return strings.Join(keySets[a], ",") < strings.Join(keySets[b], ",") })
		var want [][]string
		switch ref {
		case "model/openai":
			want = [][]string{{}, {"OPENAI_API_KEY"}} // the local endpoint names no key
		case "model/anthropic":
			want = [][]string{{"ANTHROPIC_API_KEY"}}
		case "model/gemini":
			want = [][]string{{"GEMINI_API_KEY"}}
		default:
			want = slices.Repeat([][]string{{}}, len(keySets))
		}
		if fmt.Sprint(keySets) != fmt.Sprint(want) {
			t.Errorf("%s processes hold %v, want %v", ref, keySets, want)
		}
	}

	// The candidate's own process: it ran, and saw none of the secrets.
	list, _, code := run(t, env, "results", "list", "--json")
	if code != 0 {
		t.Fatalf("results list: %d", code)
	}
	m := regexp.MustCompile(`worker environment holds \[([^\]]*)\]`).FindStringSubmatch(list)
	switch {
	case m == nil:
		t.Errorf("the probe's report is not in the results:\n%s", list)
	case m[1] != "":
		t.Errorf("the candidate's worker holds %s", m[1])
	}
	for _, v := range envTestKeys {
		if bytes.Contains([]byte(out+errOut+list), []byte(v)) {
			t.Errorf("a key's value is in the output")
		}
	}
}

// What each built-in reads under its settings is what its process is granted.
func TestGrantBuiltin(t *testing.T) {
	for _, tc := range []struct {
		ref    string
		source plugins.Source
		config string
		want   []string
	}{
		{"model/openai", plugins.SourceBuiltin, `{"model": "gpt-5"}`, []string{"OPENAI_API_KEY"}},
		{"model/openai", plugins.SourceBuiltin, `{"model": "m", "base_url": "http://localhost:8000/v1"}`, nil},
		{"model/openai", plugins.SourceBuiltin, `{"model": "m", "base_url": "https://api.deepseek.com/v1", "api_key_env": "DEEPSEEK_API_KEY"}`, []string{"DEEPSEEK_API_KEY"}},
		{"model/anthropic", plugins.SourceBuiltin, `{"model": "c"}`, []string{"ANTHROPIC_API_KEY"}},
		{"model/anthropic", plugins.SourceBundled, `{"model": "c", "api_key_env": "MY_CLAUDE"}`, []string{"MY_CLAUDE"}},
		{"model/gemini", plugins.SourceBuiltin, `{"model": "g"}`, []string{"GEMINI_API_KEY"}},
		{"model/gemini", plugins.SourceBuiltin, `{"model": "g", "backend": "vertex", "project": "p", "location": "l"}`, []string{"GOOGLE_APPLICATION_CREDENTIALS"}},
		{"model/gemini", plugins.SourceBuiltin, `{"model": "g", "backend": "vertex", "api_key_env": "VERTEX_KEY"}`, []string{"VERTEX_KEY"}},
		{"model/replay", plugins.SourceBuiltin, `{"source": "examples"}`, nil},
		{"target/cluster", plugins.SourceBuiltin, `{}`, []string{"KBP_CLUSTER_PASSWORD"}},
		{"target/local", plugins.SourceBuiltin, `{}`, nil},
		{"model/openai", plugins.SourceThirdParty, `{"model": "gpt-5"}`, nil},
	} {
		t.Run(tc.ref+" "+tc.config, func(t *testing.T) {
			kind, name, _ := strings.Cut(tc.ref, "/")
			got := grantBuiltin(plugins.Spec{Kind: kind, Name: name, Source: tc.source}, json.RawMessage(tc.config))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
