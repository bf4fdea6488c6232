package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A word a group command does not know is an error that names what was meant, not its help
// with exit status 0.
func TestUnknownSubcommandFails(t *testing.T) {
	env := isolated(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"results", "delete", "x"}, `unknown command "delete" for "kbplatform results"`},
		{[]string{"results", "shwo", "x"}, `did you mean "show"`},
		{[]string{"tasks", "lsit"}, `did you mean "list"`},
		{[]string{"study", "nope"}, "its commands:"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, code := run(t, env, tc.args...)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, want non-zero with %q\n%s", code, tc.want, errOut)
			}
		})
	}
	if out, _, code := run(t, env, "results"); code != 0 || !strings.Contains(out, "Available Commands") {
		t.Errorf("a bare group command prints its help: %d\n%s", code, out)
	}
}

// `eval --help` names its placeholders ID and FILE, not words taken from the help text.
func TestEvalHelpPlaceholders(t *testing.T) {
	out, _, code := run(t, isolated(t), "eval", "--help")
	if code != 0 || !strings.Contains(out, "--task ID ") || !strings.Contains(out, "--kernel FILE ") || strings.Contains(out, "--task tasks") {
		t.Fatalf("help:\n%s", out)
	}
}

// `config` shows every setting the configuration file accepts, and the Python it found.
func TestConfigShowsEverySetting(t *testing.T) {
	env := isolated(t)
	out, errOut, code := run(t, env, "config")
	if code != 0 {
		t.Fatalf("%d %s", code, errOut)
	}
	for key := range settingDefaults() {
		if !strings.Contains(out, key+" ") {
			t.Errorf("config does not show %s", key)
		}
	}
	if !strings.Contains(out, "found") || !strings.Contains(out, "torch") {
		t.Errorf("config does not show the Python found:\n%s", out)
	}
}

// `plugins list` never starts a third-party binary that is not locked; `plugins lock`, the act of
// trusting it, does.
func TestPluginsListDoesNotStartUnlockedBinaries(t *testing.T) {
	env := isolated(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	exe, _ := os.Executable()
	script := fmt.Sprintf("#!/bin/sh\ntouch %q\nKBP_TEST_PLUGIN=crashing-strategy exec %q -test.run=^$ \"$@\"\n", marker, exe)
	writeFile(t, dir, "kbplugin-strategy-crashing", script)
	os.Chmod(filepath.Join(dir, "kbplugin-strategy-crashing"), 0o755)
	env["KBP_PLUGIN_LOCK"] = filepath.Join(dir, "plugins.lock")
	env["KBP_PLUGIN_PATH"] = dir
	out, _, code := run(t, env, "plugins", "list")
	if code != 0 || !strings.Contains(out, "strategy/crashing") || !strings.Contains(out, "not locked") {
		t.Fatalf("list: %d\n%s", code, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("plugins list started an unlocked binary")
	}
	if out, _, code := run(t, env, "plugins", "lock"); code != 0 || !strings.Contains(out, "locked strategy/crashing") {
		t.Fatalf("lock: %d\n%s", code, out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("plugins lock did not read the binary's identity")
	}
}
