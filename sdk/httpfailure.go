package sdk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kbplatform/kbplatform/sdk/secret"
)

// HTTPFailure turns a provider's HTTP error reply into the SDK's generation failures, so that
// every model plugin classifies the same way: 401 is an invalid key, 404 an unknown model, 429 a
// rate limit (with the server's Retry-After), 5xx unavailable, and a 400 whose message says so is
// a context length, a content filter or a rejected parameter. code and message are the
// provider's error code and text (either may be empty). A secret of the plugin's environment,
// or anything shaped like a provider's key, is redacted from the text: a provider may echo the
// key it was sent ("Incorrect API key provided: sk-...").
func HTTPFailure(status int, header http.Header, code, message string) error {
	text := secret.Redact(strings.TrimSpace(code+" "+message), secret.InEnv()...)
	if text == "" {
		text = http.StatusText(status)
	}
	msg := fmt.Sprintf("HTTP %d: %s", status, text)
	low := strings.ToLower(text)
	switch {
	case status == http.StatusTooManyRequests || strings.Contains(low, "rate_limit") || strings.Contains(low, "resource_exhausted"):
		if strings.Contains(low, "insufficient_quota") || strings.Contains(low, "billing") {
			return fmt.Errorf("%w: %s (quota or billing: retrying will not help)", ErrPermission, msg)
		}
		return WithRetryAfter(fmt.Errorf("%w: %s", ErrRateLimited, msg), ParseRetryAfter(header))
	case status == http.StatusUnauthorized || matchAny(low, "api key not valid", "api_key_invalid", "invalid api key", "invalid_api_key"):
		return fmt.Errorf("%w: %s", ErrInvalidAPIKey, msg)
	case status == http.StatusForbidden:
		return fmt.Errorf("%w: %s", ErrPermission, msg)
	case status == http.StatusRequestTimeout || status == 529 || status >= 500:
		return WithRetryAfter(fmt.Errorf("%w: %s", ErrUnavailable, msg), ParseRetryAfter(header))
	case status == http.StatusRequestEntityTooLarge || matchAny(low, "context_length", "context length", "maximum context", "too many tokens", "prompt is too long", "input is too long", "exceeds the maximum", "token limit"):
		return fmt.Errorf("%w: %s", ErrContextLength, msg)
	case matchAny(low, "content_filter", "content_policy", "content policy", "safety", "blocked"):
		return fmt.Errorf("%w: %s", ErrContentFiltered, msg)
	case status == http.StatusNotFound || matchAny(low, "model_not_found", "model not found", "does not exist", "unknown model", "invalid model"):
		return fmt.Errorf("%w: %s", ErrUnknownModel, msg)
	case matchAny(low, "unsupported_parameter", "unsupported parameter", "unsupported_value", "not supported", "unrecognized", "extra inputs are not permitted", "unknown field", "unknown name", "unknown parameter", "invalid parameter"):
		return fmt.Errorf("%w: %s", ErrRejectedParameter, msg)
	}
	return fmt.Errorf("%w: %s", ErrInvalidArgument, msg)
}

func matchAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// ParseRetryAfter reads how long a server asked to wait: retry-after-ms, or Retry-After in
// seconds or as an HTTP date. 0 when it did not say.
func ParseRetryAfter(h http.Header) time.Duration {
	if h == nil {
		return 0
	}
	if ms, err := strconv.ParseFloat(h.Get("retry-after-ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// TransportFailure classifies an error that got no HTTP reply: a timeout, a refused or reset
// connection (both unavailable: the host retries them), or the caller's cancellation. The
// error's text is redacted as HTTPFailure's is (a URL may carry a key in its query).
func TransportFailure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	text := secret.Redact(err.Error(), secret.InEnv()...)
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%w: the provider did not answer in time: %s", context.DeadlineExceeded, text)
	}
	return fmt.Errorf("%w: %s", ErrUnavailable, text)
}
