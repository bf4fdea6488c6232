package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Generation failure classes: why a model call gave no usable reply. They are recorded with the
// attempt (Attempt.Failure) and with the call, so a study can count them per model.
const (
	FailureMissingKey        = "missing_api_key"
	FailureInvalidKey        = "invalid_api_key"
	FailurePermission        = "permission_denied"
	FailureUnknownModel      = "unknown_model"
	FailureContextLength     = "context_length_exceeded"
	FailureContentFiltered   = "content_filtered"
	FailureEmptyReply        = "empty_reply"
	FailureMalformedReply    = "malformed_reply"
	FailureRejectedParameter = "rejected_parameter"
	FailureNoCode            = "no_code"
	FailureRateLimited       = "rate_limited"
	FailureUnavailable       = "unavailable"
	FailureTimeout           = "timeout"
	FailureInvalidRequest    = "invalid_request"
	FailureNotFound          = "not_found" // nothing to replay for the task
	FailureOther             = "other"
)

var failureClasses = []struct {
	err   error
	class string
}{
	{ErrMissingAPIKey, FailureMissingKey},
	{ErrInvalidAPIKey, FailureInvalidKey},
	{ErrPermission, FailurePermission},
	{ErrUnknownModel, FailureUnknownModel},
	{ErrContextLength, FailureContextLength},
	{ErrContentFiltered, FailureContentFiltered},
	{ErrEmptyReply, FailureEmptyReply},
	{ErrMalformedReply, FailureMalformedReply},
	{ErrRejectedParameter, FailureRejectedParameter},
	{ErrNoCode, FailureNoCode},
	{ErrRateLimited, FailureRateLimited},
	{ErrUnavailable, FailureUnavailable},
	{context.DeadlineExceeded, FailureTimeout},
	{ErrInvalidArgument, FailureInvalidRequest},
	{ErrNotFound, FailureNotFound},
}

// FailureClass names the class of a generation error ("" for nil).
func FailureClass(err error) string {
	if err == nil {
		return ""
	}
	for _, f := range failureClasses {
		if errors.Is(err, f.err) {
			return f.class
		}
	}
	return FailureOther
}

// Transient reports whether a generation error may go away on its own (rate limits, a server
// error, a timeout): the host retries those, and a strategy that still sees one should leave its
// task unfinished so that a resumed study tries again. Every other failure is final for the
// request: retrying would send the same request and get the same answer.
func Transient(err error) bool {
	return errors.Is(err, ErrRateLimited) || errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

type retryAfterError struct {
	err   error
	delay time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// WithRetryAfter attaches the delay a server asked for (Retry-After) to err; it crosses the plugin
// boundary as gRPC RetryInfo.
func WithRetryAfter(err error, d time.Duration) error {
	if err == nil || d <= 0 {
		return err
	}
	return &retryAfterError{err: err, delay: d}
}

// RetryAfter returns the delay attached to err by WithRetryAfter, on either side of the boundary.
func RetryAfter(err error) (time.Duration, bool) {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.delay, true
	}
	var re *RemoteError
	if errors.As(err, &re) && re.RetryAfter > 0 {
		return re.RetryAfter, true
	}
	return 0, false
}

// Failuref wraps a sentinel with a message: Failuref(ErrContextLength, "%d tokens", n).
func Failuref(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}
