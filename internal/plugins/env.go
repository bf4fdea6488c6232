package plugins

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/secret"
)

// A plugin process gets an explicit environment (go-plugin's SkipHostEnv is set): the host's,
// less every credential, plus the credentials granted to that one instance. Candidate code runs
// in processes a target plugin starts, and a backend or strategy has no use for a key, so a key
// reaching them is a key handed to the code under test. KBP_ settings pass: they configure the
// platform and its plugins (KBP_PYTHON, KBP_CLUSTER_URL); one whose name marks a credential
// (KBP_CLUSTER_PASSWORD) is a secret like any other.

// grants lists the secret variables an instance of spec with these settings receives: for a
// model, the variable its api_key_env names; then whatever Options.Grant adds.
func (m *Manager) grants(spec Spec, config json.RawMessage) []string {
	var out []string
	if spec.Kind == sdk.KindModel {
		var s struct {
			APIKeyEnv string `json:"api_key_env"`
		}
		if json.Unmarshal(config, &s) == nil && s.APIKeyEnv != "" {
			out = append(out, s.APIKeyEnv)
		}
	}
	if m.opt.Grant != nil {
		out = append(out, m.opt.Grant(spec, config)...)
	}
	return out
}

// pluginEnv is the environment of a plugin process: environ without the variables that
// secret.IsName recognises or secrets names, except those granted; then extra, as given.
func pluginEnv(environ, extra, secrets, grant []string) []string {
	out := make([]string, 0, len(environ)+len(extra))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if (secret.IsName(name) || slices.Contains(secrets, name)) && !slices.Contains(grant, name) {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}
