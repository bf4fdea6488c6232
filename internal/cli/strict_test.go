package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Settings are read strictly: a misspelt key, a value of the wrong type or a broken file stops
// the command with a message that names the file, the key and the key that was probably meant.
func TestStrictSettings(t *testing.T) {
	env := isolated(t)
	dir := t.TempDir()
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string
	}{
		{"misspelt key", "devcie: cpu\n", nil, []string{"kbplatform.yaml", `unknown key "devcie"`, `did you mean "device"`}},
		{"misspelt key at the wrong level", "sedes: 3\n", nil, []string{`unknown key "sedes"`, `did you mean "contract.seeds"`}},
		{"misspelt nested key", "contract:\n  timedcalls: 3\n", nil, []string{`unknown key "contract.timedcalls"`, `"contract.timed_calls"`}},
		{"wrong type", "contract:\n  seeds: five\n", nil, []string{"kbplatform.yaml", `key "contract.seeds"`, `"five" is not a whole number`}},
		{"syntax error", "contract: [\n", nil, []string{"kbplatform.yaml", "yaml"}},
		{"wrong type in the environment", "", map[string]string{"KBP_CONTRACT_SEEDS": "five"}, []string{"KBP_CONTRACT_SEEDS", `"five" is not a whole number`}},
		{"a good file", "device: cpu\ncontract:\n  seeds: 2\n  timeout: 90s\n", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, "kbplatform.yaml")
			if err := os.WriteFile(cfg, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			e := map[string]string{}
			for k, v := range env {
				e[k] = v
			}
			e["KBP_CONFIG"] = cfg
			for k, v := range tc.env {
				e[k] = v
			}
			out, errOut, code := run(t, e, "config")
			if tc.want == nil {
				if code != 0 || !regexp.MustCompile(`contract\.seeds\s+2\n`).MatchString(out) {
					t.Fatalf("good file refused: %d %s", code, errOut)
				}
				return
			}
			if code == 0 {
				t.Fatalf("accepted:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("message lacks %q:\n%s", w, errOut)
				}
			}
			t.Setenv("KBP_CONTRACT_SEEDS", "")
		})
	}
}

// The config file is kbplatform.yaml in the current folder, never another file named kbplatform
// (such as the binary itself).
func TestConfigFileIsFoundByItsName(t *testing.T) {
	env := isolated(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kbplatform"), []byte("\x7fELF\x00\x01binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	t.Cleanup(func() { os.Chdir(wd) })
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := run(t, env, "config"); code != 0 || !strings.Contains(out, "(none found)") {
		t.Fatalf("a file named kbplatform was read as configuration: %d %s", code, errOut)
	}
	os.WriteFile(filepath.Join(dir, "kbplatform.yaml"), []byte("device: cpu\n"), 0o644)
	if out, _, code := run(t, env, "config"); code != 0 || !strings.Contains(out, filepath.Join(dir, "kbplatform.yaml")) {
		t.Fatalf("kbplatform.yaml not found: %d %s", code, out)
	}
}

// A plugin's settings are strict too: an unknown key names the flag it came from and the key
// meant.
func TestPluginSettingsAreStrict(t *testing.T) {
	env := isolated(t)
	_, errOut, code := run(t, env, "study", "run", "--tasks", "kbp/l1/relu", "--model", "replay",
		"--model-config", `{"sorce":"examples"}`, "--device", "cpu", "-q")
	if code == 0 {
		t.Fatal("accepted an unknown key")
	}
	for _, w := range []string{"--model-config", `unknown key "sorce"`, `did you mean "source"`} {
		if !strings.Contains(errOut, w) {
			t.Errorf("message lacks %q:\n%s", w, errOut)
		}
	}
}

// A study file is strict too: an unknown key names the file, its line and the key meant.
func TestStudyFileIsStrict(t *testing.T) {
	env := isolated(t)
	f := writeFile(t, t.TempDir(), "study.yaml", "tasks: [kbp/l1/relu]\nmodel:\n  name: replay\n  confg: {}\nsedes: 3\n")
	_, errOut, code := run(t, env, "study", "run", "--file", f, "-q")
	if code == 0 {
		t.Fatal("accepted unknown keys")
	}
	for _, w := range []string{"study.yaml", "line 4", `unknown key "confg"`, `did you mean "model.config"`} {
		if !strings.Contains(errOut, w) {
			t.Errorf("message lacks %q:\n%s", w, errOut)
		}
	}
}

// A second import that would change stored tasks is refused unless --replace; --origin imports
// beside them; importing the same files again is harmless.
func TestSecondImportNeedsReplaceOrOrigin(t *testing.T) {
	env := isolated(t)
	checkout := func(body string) string {
		kb := t.TempDir()
		os.MkdirAll(filepath.Join(kb, "KernelBench", "level1"), 0o755)
		task := "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return " + body +
			"\n\ndef get_inputs():\n    return [torch.randn(16)]\n\ndef get_init_inputs():\n    return []\n"
		os.WriteFile(filepath.Join(kb, "KernelBench", "level1", "19_ReLU.py"), []byte(task), 0o644)
		return kb
	}
	first, second := checkout("torch.relu(x)"), checkout("torch.relu(x) * 1.0")
	steps := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"first import", []string{"tasks", "import", "kernelbench", first}, 0, "imported 1 tasks"},
		{"same files again", []string{"tasks", "import", "kernelbench", first}, 0, "imported 1 tasks"},
		{"another checkout", []string{"tasks", "import", "kernelbench", second}, 1, "--replace"},
		{"beside it", []string{"tasks", "import", "kernelbench", second, "--origin", "kbfork"}, 0, "imported 1 tasks"},
		{"replacing it", []string{"tasks", "import", "kernelbench", second, "--replace"}, 0, "replaced 1 task"},
	}
	for _, s := range steps {
		out, errOut, code := run(t, env, s.args...)
		if code != s.code || !strings.Contains(out+errOut, s.want) {
			t.Fatalf("%s: %d, want %d with %q\n%s%s", s.name, code, s.code, s.want, out, errOut)
		}
	}
	out, _, _ := run(t, env, "tasks", "list", "--origin", "kbfork")
	if !strings.Contains(out, "kbfork/l1/19_ReLU") {
		t.Errorf("--origin import missing:\n%s", out)
	}
	out, _, _ = run(t, env, "tasks", "show", "kernelbench/l1/19_ReLU")
	if !strings.Contains(out, "* 1.0") {
		t.Errorf("--replace did not replace:\n%s", out)
	}
}
