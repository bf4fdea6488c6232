package secret

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestIsName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"OPENAI_API_KEY", true},
		{"ANTHROPIC_API_KEY", true},
		{"GEMINI_API_KEY", true},
		{"GOOGLE_API_KEY", true},
		{"OPENAI_BASE_URL", true}, // a provider's variable: only its model plugin may want it
		{"OPENAI_ORG_ID", true},
		{"AZURE_OPENAI_ENDPOINT", true},
		{"AWS_ACCESS_KEY_ID", true},
		{"AWS_SESSION_TOKEN", true},
		{"AWS_SECRET_ACCESS_KEY", true},
		{"GOOGLE_APPLICATION_CREDENTIALS", true},
		{"HF_TOKEN", true},
		{"GITHUB_TOKEN", true},
		{"DEEPSEEK_API_KEY", true},
		{"KBP_TEST_SECRET_TOKEN", true},
		{"KBP_CLUSTER_PASSWORD", true},
		{"PGPASSWORD", true},
		{"DB_PASSWORD_FILE", true},
		{"CLIENT_SECRET", true},
		{"TLS_PRIVATE_KEY_PATH", true},
		{"API_KEY", true},
		{"TOKEN", true},
		{"my_api_key", true},
		{"SSH_AUTH_SOCK", true},

		{"PATH", false},
		{"HOME", false},
		{"KBP_PYTHON", false},
		{"KBP_CLUSTER_URL", false},
		{"KBP_CLUSTER_NKEY_FILE", false}, // a path; the seed stays in its file
		{"CUDA_VISIBLE_DEVICES", false},
		{"TOKENIZERS_PARALLELISM", false},
		{"KEYBOARD", false},
		{"MONKEY", false},
		{"HTTPS_PROXY", false},
		{"GOOGLE_CLOUD_PROJECT", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsName(tc.name); got != tc.want {
				t.Errorf("IsName(%q) = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}

func TestValues(t *testing.T) {
	environ := []string{"PATH=/usr/bin", "OPENAI_API_KEY=sk-proj-123456789", "SHORT_TOKEN=1", "MY_ENDPOINT=abcdefgh-1234",
		"OTHER=abcdefgh-5678", "GEMINI_API_KEY=sk-proj-123456789", "NOEQUALS"}
	got := Values(environ, "MY_ENDPOINT")
	want := []string{"sk-proj-123456789", "abcdefgh-1234"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		values   []string
		want     string
	}{
		{"a value", "HTTP 401: bad key kbp-9f8e7d6c5b in request", []string{"kbp-9f8e7d6c5b"}, "HTTP 401: bad key [redacted] in request"},
		{"longest first", "abcdefgh-longer and abcdefgh", []string{"abcdefgh", "abcdefgh-longer"}, "[redacted] and [redacted]"},
		{"short values stay", "n=1 true", []string{"1", "true"}, "n=1 true"},
		{"openai", "Incorrect API key provided: sk-proj-AbC123xyz_-. You can find", nil, "Incorrect API key provided: [redacted]. You can find"},
		{"openai masked", "Incorrect API key provided: sk-abc12***************wxyz.", nil, "Incorrect API key provided: [redacted]."},
		{"anthropic", "invalid x-api-key sk-ant-api03-AAAABBBBCCCC", nil, "invalid x-api-key [redacted]"},
		{"google", "API key not valid: AIzaSyA1234567890abcdefghijk", nil, "API key not valid: [redacted]"},
		{"bearer", "Authorization: Bearer eyJhbGciOi.payload.sig", nil, "Authorization: Bearer [redacted]"},
		{"query", `Post "https://h/v1/m:generate?alt=sse&key=xyz123": EOF`, nil, `Post "https://h/v1/m:generate?alt=sse&key=[redacted]": EOF`},
		{"ordinary words", "task-level risk-averse disk-abcdefghij", nil, "task-level risk-averse disk-abcdefghij"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Redact(tc.in, tc.values...); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

var errSentinel = errors.New("invalid API key")

func TestRedactErrorKeepsIdentity(t *testing.T) {
	err := fmt.Errorf("%w: HTTP 401: got kbp-0123456789", errSentinel)
	red := RedactError(err, "kbp-0123456789")
	if strings.Contains(red.Error(), "kbp-0123456789") || !strings.Contains(red.Error(), Redacted) {
		t.Errorf("message %q", red.Error())
	}
	if !errors.Is(red, errSentinel) {
		t.Errorf("errors.Is lost the sentinel")
	}
	if wrapped := fmt.Errorf("call: %w", red); strings.Contains(wrapped.Error(), "kbp-0123456789") {
		t.Errorf("wrapping shows the key again: %q", wrapped)
	}
	if clean := errors.New("nothing here"); RedactError(clean, "kbp-0123456789") != clean {
		t.Errorf("an error without a secret should come back as it is")
	}
	if RedactError(nil) != nil {
		t.Errorf("nil should stay nil")
	}
}
