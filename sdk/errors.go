package sdk

import (
	"context"
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kbplatform/kbplatform/sdk/secret"
)

// Errors that keep their identity across the plugin boundary: a plugin returns (or wraps) one,
// the host gets an error for which errors.Is(err, sdk.ErrX) holds, with the plugin's message.
var (
	ErrNotFound        = errors.New("not found")
	ErrNoCode          = errors.New("no code in the reply")
	ErrInvalidArgument = errors.New("invalid argument")
	ErrInvalidConfig   = errors.New("invalid plugin configuration")
	ErrBudgetExhausted = errors.New("budget exhausted")
	ErrRateLimited     = errors.New("rate limited")
	ErrUnavailable     = errors.New("unavailable")
	ErrUnsupported     = errors.New("not supported")
	ErrMissingAPIKey   = errors.New("missing API key")
	ErrPermission      = errors.New("permission denied")
	// Generation failures a model plugin reports (FailureClass names each).
	ErrInvalidAPIKey     = errors.New("invalid API key")
	ErrUnknownModel      = errors.New("unknown model")
	ErrContextLength     = errors.New("context length exceeded")
	ErrContentFiltered   = errors.New("content filtered")
	ErrEmptyReply        = errors.New("empty reply")
	ErrMalformedReply    = errors.New("malformed reply")
	ErrRejectedParameter = errors.New("parameter rejected by the server")
)

// ErrorDomain is the ErrorInfo domain of kbplatform's errors.
const ErrorDomain = "kbplatform"

var sentinels = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{ErrNoCode, codes.NotFound, "NO_CODE"},
	{ErrNotFound, codes.NotFound, "NOT_FOUND"},
	{ErrInvalidConfig, codes.InvalidArgument, "INVALID_CONFIG"},
	{ErrInvalidArgument, codes.InvalidArgument, "INVALID_ARGUMENT"},
	{ErrBudgetExhausted, codes.ResourceExhausted, "BUDGET_EXHAUSTED"},
	{ErrRateLimited, codes.ResourceExhausted, "RATE_LIMITED"},
	{ErrUnavailable, codes.Unavailable, "UNAVAILABLE"},
	{ErrUnsupported, codes.Unimplemented, "UNSUPPORTED"},
	{ErrMissingAPIKey, codes.Unauthenticated, "MISSING_API_KEY"},
	{ErrPermission, codes.PermissionDenied, "PERMISSION_DENIED"},
	{ErrInvalidAPIKey, codes.Unauthenticated, "INVALID_API_KEY"},
	{ErrUnknownModel, codes.NotFound, "UNKNOWN_MODEL"},
	{ErrContextLength, codes.InvalidArgument, "CONTEXT_LENGTH"},
	{ErrContentFiltered, codes.FailedPrecondition, "CONTENT_FILTERED"},
	{ErrEmptyReply, codes.DataLoss, "EMPTY_REPLY"},
	{ErrMalformedReply, codes.DataLoss, "MALFORMED_REPLY"},
	{ErrRejectedParameter, codes.InvalidArgument, "REJECTED_PARAMETER"},
}

// ToStatus turns an error into a gRPC status error carrying an ErrorInfo reason for sentinels.
// No message leaves a process with a secret of that process's environment in it, or a word
// shaped like a provider's key (sdk/secret): whichever side made the error, the other side logs
// and stores it.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isLocal(err) {
		return err // already a status (e.g. from a nested call)
	}
	msg := secret.Redact(err.Error(), secret.InEnv()...)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, msg)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, msg)
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: s.reason, Domain: ErrorDomain}}
			if d, ok := RetryAfter(err); ok {
				details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
			}
			st, derr := status.New(s.code, msg).WithDetails(details...)
			if derr != nil {
				return status.Error(s.code, msg)
			}
			return st.Err()
		}
	}
	return status.Error(codes.Unknown, msg)
}

// isLocal reports whether err is one of ours that merely happens to wrap a status.
func isLocal(err error) bool {
	var re *RemoteError
	return errors.As(err, &re)
}

// RemoteError is an error that came back from the other side of the plugin boundary.
type RemoteError struct {
	Code     codes.Code
	Msg      string
	sentinel error
	// RetryAfter is the delay the remote side asked for (gRPC RetryInfo), 0 when none.
	RetryAfter time.Duration
}

func (e *RemoteError) Error() string { return e.Msg }

// Unwrap returns the sentinel the remote side used, so errors.Is works.
func (e *RemoteError) Unwrap() error { return e.sentinel }

// FromStatus turns a gRPC status error back into an error matching the original sentinel.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	re := &RemoteError{Code: st.Code(), Msg: st.Message()}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.RetryDelay != nil {
			re.RetryAfter = ri.RetryDelay.AsDuration()
		}
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == ErrorDomain {
			for _, s := range sentinels {
				if s.reason == info.Reason {
					re.sentinel = s.err
				}
			}
		}
	}
	if re.sentinel == nil {
		switch st.Code() {
		case codes.DeadlineExceeded:
			re.sentinel = context.DeadlineExceeded
		case codes.Canceled:
			re.sentinel = context.Canceled
		case codes.Unavailable:
			re.sentinel = ErrUnavailable
		}
	}
	return re
}
