package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// Every listing command prints JSON with --json, even over an empty database.
func TestListingsTakeJSON(t *testing.T) {
	env := isolated(t)
	for _, args := range [][]string{
		{"tasks", "list"}, {"results", "list"}, {"results", "cost"}, {"study", "list"}, {"plugins", "list"}, {"config"},
	} {
		out, errOut, code := run(t, env, append(args, "--json", "-q")...)
		if code != 0 {
			t.Errorf("%s --json: exit %d\n%s", strings.Join(args, " "), code, errOut)
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("%s --json is not JSON: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// An empty list is an empty JSON list, not null.
	if out, _, _ := run(t, env, "study", "list", "--json", "-q"); strings.TrimSpace(out) != "[]" {
		t.Errorf("study list --json of no study: %q", out)
	}
}
