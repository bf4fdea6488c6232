// Package secret recognises credentials in environment variables and removes them from text.
//
// The host uses it to decide which variables a plugin process receives (docs/models.md: no
// plugin but the model that names a key ever holds it), and every process uses it before an
// error leaves it: a provider that echoes a key in an error body ("Incorrect API key provided:
// sk-...") must not put the key into a log line, a stored record or a strategy's feedback.
//
// Recognition is by name, because the value of a key has no reliable shape; redaction is by
// value (of every variable recognised, and of any the caller names) and by the shapes the
// common providers' keys have.
package secret

import (
	"os"
	"regexp"
	"slices"
	"strings"
)

// Redacted replaces a secret in text.
const Redacted = "[redacted]"

// MinLen is the shortest value redacted by value: a shorter one ("1", "true") would rewrite
// ordinary text and is no key anyway.
const MinLen = 8

var (
	// suffixes of names that hold a credential; "_" + the name is tested, so API_KEY and TOKEN
	// alone count too.
	suffixes = []string{"_KEY", "_APIKEY", "_KEY_ID", "_TOKEN", "_SECRET", "_CREDENTIALS", "_CREDS", "_PASSWORD", "_PASSWD"}
	// words that mark a credential anywhere in a name (AWS_SECRET_ACCESS_KEY, DB_PASSWORD_FILE).
	words = []string{"SECRET", "PASSWORD", "PASSWD", "PRIVATE_KEY"}
	// prefixes of the model providers' variables and of cloud credentials: a provider's base URL
	// or organisation is no key, but no process other than its model plugin has use for it.
	prefixes = []string{"OPENAI_", "ANTHROPIC_", "GEMINI_", "AZURE_OPENAI_", "AWS_"}
	// names that give access without looking like it: the agent that signs with the user's SSH
	// keys.
	names = []string{"SSH_AUTH_SOCK"}
)

// IsName reports whether an environment variable of this name holds a credential. Names are
// compared in upper case.
func IsName(name string) bool {
	n := strings.ToUpper(name)
	if slices.Contains(names, n) {
		return true
	}
	for _, s := range suffixes {
		if strings.HasSuffix("_"+n, s) {
			return true
		}
	}
	for _, w := range words {
		if strings.Contains(n, w) {
			return true
		}
	}
	for _, p := range prefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// Values returns the values, MinLen long or longer, of the variables in environ (NAME=value
// lines) that IsName recognises or that extra names.
func Values(environ []string, extra ...string) []string {
	var out []string
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || len(value) < MinLen || (!IsName(name) && !slices.Contains(extra, name)) {
			continue
		}
		if !slices.Contains(out, value) {
			out = append(out, value)
		}
	}
	return out
}

// InEnv is Values of this process's environment.
func InEnv(extra ...string) []string { return Values(os.Environ(), extra...) }

// shapes are the forms of the keys common providers issue (OpenAI's and Anthropic's sk-...,
// Google's AIza...), a bearer token, and a key in a URL's query; a provider that echoes a key
// may mask part of it with '*', which is matched too.
var shapes = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`\bsk-[A-Za-z0-9_*-]{8,}`), Redacted},
	{regexp.MustCompile(`\bAIza[A-Za-z0-9_*-]{16,}`), Redacted},
	{regexp.MustCompile(`\b(Bearer\s+)[A-Za-z0-9._~+/*=-]{8,}`), "${1}" + Redacted},
	{regexp.MustCompile(`(?i)([?&](?:key|api_key|apikey|access_token|token)=)[^&\s"']+`), "${1}" + Redacted},
}

// Redact returns s with every one of values, and every key-shaped word, replaced by Redacted.
// The longest values go first, so that a key containing another is not half replaced.
func Redact(s string, values ...string) string {
	vs := slices.Clone(values)
	slices.SortFunc(vs, func(a, b string) int { return len(b) - len(a) })
	for _, v := range vs {
		if len(v) >= MinLen {
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	for _, sh := range shapes {
		s = sh.re.ReplaceAllString(s, sh.repl)
	}
	return s
}

// RedactError returns err with its message redacted as Redact does; errors.Is and errors.As see the
// original chain (a redacted ErrInvalidAPIKey is still one). nil stays nil, and an error whose
// message has nothing to redact is returned as it is.
func RedactError(err error, values ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	red := Redact(msg, values...)
	if red == msg {
		return err
	}
	return &redacted{msg: red, err: err}
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
