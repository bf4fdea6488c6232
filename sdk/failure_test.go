package sdk

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHTTPFailure(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		header    http.Header
		code, msg string
		want      error
		class     string
		wait      time.Duration
		transient bool
	}{
		{"rate limit with Retry-After seconds", 429, http.Header{"Retry-After": {"12"}}, "rate_limit_exceeded", "slow down", ErrRateLimited, FailureRateLimited, 12 * time.Second, true},
		{"rate limit with retry-after-ms", 429, http.Header{"Retry-After-Ms": {"1500"}}, "", "", ErrRateLimited, FailureRateLimited, 1500 * time.Millisecond, true},
		{"quota is not a rate limit", 429, nil, "insufficient_quota", "check your plan and billing", ErrPermission, FailurePermission, 0, false},
		{"server error", 502, nil, "", "bad gateway", ErrUnavailable, FailureUnavailable, 0, true},
		{"overloaded", 529, nil, "overloaded_error", "Overloaded", ErrUnavailable, FailureUnavailable, 0, true},
		{"invalid key", 401, nil, "invalid_api_key", "Incorrect API key", ErrInvalidAPIKey, FailureInvalidKey, 0, false},
		{"invalid key as 400", 400, nil, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", ErrInvalidAPIKey, FailureInvalidKey, 0, false},
		{"forbidden", 403, nil, "", "no access", ErrPermission, FailurePermission, 0, false},
		{"unknown model", 404, nil, "model_not_found", "The model does not exist", ErrUnknownModel, FailureUnknownModel, 0, false},
		{"context length", 400, nil, "context_length_exceeded", "maximum context length is 8192 tokens", ErrContextLength, FailureContextLength, 0, false},
		{"too large", 413, nil, "request_too_large", "", ErrContextLength, FailureContextLength, 0, false},
		{"content filter", 400, nil, "content_filter", "flagged by the content policy", ErrContentFiltered, FailureContentFiltered, 0, false},
		{"rejected parameter", 400, nil, "unsupported_parameter", "Unsupported parameter: 'temperature'", ErrRejectedParameter, FailureRejectedParameter, 0, false},
		{"other bad request", 400, nil, "", "messages must alternate", ErrInvalidArgument, FailureInvalidRequest, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := HTTPFailure(tc.status, tc.header, tc.code, tc.msg)
			if !errors.Is(err, tc.want) || FailureClass(err) != tc.class || Transient(err) != tc.transient {
				t.Fatalf("got %v (class %s, transient %v), want %v (%s, %v)", err, FailureClass(err), Transient(err), tc.want, tc.class, tc.transient)
			}
			// The class and the wait survive the plugin boundary.
			back := FromStatus(ToStatus(err))
			if !errors.Is(back, tc.want) || FailureClass(back) != tc.class {
				t.Errorf("across the boundary: %v (class %s)", back, FailureClass(back))
			}
			if d, _ := RetryAfter(back); d != tc.wait {
				t.Errorf("retry after %s across the boundary, want %s", d, tc.wait)
			}
		})
	}
}

func TestTransportFailure(t *testing.T) {
	ctx := context.Background()
	if err := TransportFailure(ctx, fmt.Errorf("dial: %w", errors.New("connection refused"))); !errors.Is(err, ErrUnavailable) || !Transient(err) {
		t.Errorf("refused: %v", err)
	}
	if err := TransportFailure(ctx, fmt.Errorf("post: %w", context.DeadlineExceeded)); FailureClass(err) != FailureTimeout || !Transient(err) {
		t.Errorf("timeout: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := TransportFailure(cancelled, errors.New("anything")); !errors.Is(err, context.Canceled) || Transient(err) {
		t.Errorf("the caller's cancellation: %v", err)
	}
}

// A provider that echoes a key in its error, or a transport error whose URL carries one: the
// failure keeps its class and loses the key.
func TestFailuresAreRedacted(t *testing.T) {
	t.Setenv("KBP_FAILURE_TEST_KEY", "kbp-f41l-0123456789")
	err := HTTPFailure(401, nil, "invalid_api_key", "Incorrect API key provided: kbp-f41l-0123456789.")
	if !errors.Is(err, ErrInvalidAPIKey) || err.Error() != "invalid API key: HTTP 401: invalid_api_key Incorrect API key provided: [redacted]." {
		t.Errorf("HTTP: %v", err)
	}
	err = TransportFailure(context.Background(), errors.New(`Post "https://h/v1beta/models/g:generateContent?key=AIzaSy0123456789abcdefghij": connection refused`))
	if !errors.Is(err, ErrUnavailable) || strings.Contains(err.Error(), "AIzaSy0123456789") {
		t.Errorf("transport: %v", err)
	}
}

func TestParseRetryAfterDate(t *testing.T) {
	h := http.Header{"Retry-After": {time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)}}
	if d := ParseRetryAfter(h); d < 25*time.Second || d > 31*time.Second {
		t.Errorf("an HTTP date 30 s ahead gave %s", d)
	}
	if d := ParseRetryAfter(http.Header{"Retry-After": {"soon"}}); d != 0 {
		t.Errorf("garbage gave %s", d)
	}
}
