package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/kbplatform/kbplatform/internal/plugins"
	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/secret"
)

// Retry says how often and how patiently a transient failure is retried.
type Retry struct {
	// MaxTries counts the first try (1: never retry).
	MaxTries int `json:"max_tries" yaml:"max_tries"`
	// Initial is the first backoff; each next one grows by half again, up to Max, with ±50%
	// jitter so that the studies a rate limit stopped together do not return together.
	Initial time.Duration `json:"initial" yaml:"initial"`
	Max     time.Duration `json:"max" yaml:"max"`
	// CallTimeout bounds one try (the plugin's own timeout should be shorter); a plugin that
	// does not answer by then is killed and restarted.
	CallTimeout time.Duration `json:"call_timeout" yaml:"call_timeout"`
}

// DefaultRetry is what a study uses unless configured otherwise.
func DefaultRetry() Retry {
	return Retry{MaxTries: 6, Initial: time.Second, Max: time.Minute, CallTimeout: 15 * time.Minute}
}

// retryable reports whether err may go away by itself: rate limits, server errors, timeouts of
// the provider, and a plugin that crashed or hung (it is restarted for the next try).
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	return sdk.Transient(err) || errors.Is(err, plugins.ErrCrashed) || errors.Is(err, plugins.ErrHung)
}

// waitError carries the server's Retry-After to backoff without hiding the error itself.
type waitError struct {
	err  error
	wait *backoff.RetryAfterError
}

func (e *waitError) Error() string   { return e.err.Error() }
func (e *waitError) Unwrap() []error { return []error{e.err, e.wait} }

// send makes the call, retrying transient failures; it returns the number of tries.
func (g *Gateway) send(ctx context.Context, req sdk.GenerateRequest) (*sdk.GenerateResponse, int, error) {
	r := g.o.Retry
	if r.MaxTries < 1 {
		r.MaxTries = 1
	}
	b := backoff.NewExponentialBackOff()
	if r.Initial > 0 {
		b.InitialInterval = r.Initial
	}
	if r.Max > 0 {
		b.MaxInterval = r.Max
	}
	tries := 0
	op := func() (*sdk.GenerateResponse, error) {
		tries++
		resp, err := g.try(ctx, req, r.CallTimeout)
		switch {
		case err == nil:
			return resp, nil
		case !retryable(ctx, err):
			return nil, backoff.Permanent(err)
		}
		if d, ok := sdk.RetryAfter(err); ok {
			return nil, &waitError{err: err, wait: &backoff.RetryAfterError{Duration: d}}
		}
		return nil, err
	}
	resp, err := backoff.Retry(ctx, op, backoff.WithBackOff(b), backoff.WithMaxTries(uint(r.MaxTries)), backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, next time.Duration) {
			g.o.Log(fmt.Sprintf("%s: try %d failed (%v); next in %s", g.o.Name, tries, err, next.Round(time.Millisecond)))
		}))
	var we *waitError
	if errors.As(err, &we) {
		err = we.err
	}
	return resp, tries, err
}

// try is one call within the endpoint's limits.
func (g *Gateway) try(ctx context.Context, req sdk.GenerateRequest, timeout time.Duration) (*sdk.GenerateResponse, error) {
	release, err := g.lim.acquire(ctx, estimateTokens(req))
	if err != nil {
		return nil, err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	resp, err := g.model.Generate(ctx, req)
	// Before the error is logged, stored or returned to a strategy: a provider may echo the key
	// (the plugin redacts it too, but a third-party plugin may not), and the variable the
	// settings name need not look like a key's.
	if err != nil {
		err = secret.RedactError(err, secret.InEnv(g.keyEnv)...)
	}
	used := 0
	if resp != nil {
		used = int(resp.Usage.PromptTokens + resp.Usage.CompletionTokens)
	}
	release(used)
	if err == nil && resp == nil {
		err = fmt.Errorf("%w: the model plugin returned nothing", sdk.ErrEmptyReply)
	}
	return resp, err
}
