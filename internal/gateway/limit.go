package gateway

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/kbplatform/kbplatform/sdk"
)

// Limits bound the load a study puts on one endpoint (0: unlimited).
type Limits struct {
	Concurrency       int     `json:"concurrency" yaml:"concurrency"`
	RequestsPerMinute float64 `json:"requests_per_minute" yaml:"requests_per_minute"`
	TokensPerMinute   float64 `json:"tokens_per_minute" yaml:"tokens_per_minute"`
}

// Limiters hands out one limiter per endpoint, so that models sharing a server share its limits.
type Limiters struct {
	mu sync.Mutex
	m  map[string]*limiter
}

// NewLimiters returns an empty set.
func NewLimiters() *Limiters { return &Limiters{m: map[string]*limiter{}} }

// get returns the endpoint's limiter; the first configuration seen for an endpoint wins.
func (ls *Limiters) get(endpoint string, l Limits) *limiter {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if lim, ok := ls.m[endpoint]; ok {
		return lim
	}
	lim := &limiter{}
	if l.Concurrency > 0 {
		lim.slots = make(chan struct{}, l.Concurrency)
	}
	if l.RequestsPerMinute > 0 {
		lim.requests = rate.NewLimiter(rate.Limit(l.RequestsPerMinute/60), max(1, int(l.RequestsPerMinute/60)))
	}
	if l.TokensPerMinute > 0 {
		lim.tokens = rate.NewLimiter(rate.Limit(l.TokensPerMinute/60), int(math.Max(1, l.TokensPerMinute)))
	}
	ls.m[endpoint] = lim
	return lim
}

type limiter struct {
	slots    chan struct{}
	requests *rate.Limiter
	tokens   *rate.Limiter
}

// acquire waits for a slot, a request and the estimated tokens; release(used) gives the slot back
// and charges the tokens the call used beyond the estimate.
func (l *limiter) acquire(ctx context.Context, estimate int) (release func(used int), err error) {
	if l.slots != nil {
		select {
		case l.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	free := func() {
		if l.slots != nil {
			<-l.slots
		}
	}
	if l.requests != nil {
		if err := l.requests.Wait(ctx); err != nil {
			free()
			return nil, fmt.Errorf("requests per minute: %w", err)
		}
	}
	if l.tokens != nil {
		estimate = min(estimate, l.tokens.Burst())
		if err := l.tokens.WaitN(ctx, estimate); err != nil {
			free()
			return nil, fmt.Errorf("tokens per minute: %w", err)
		}
	}
	return func(used int) {
		if l.tokens != nil && used > estimate {
			// Charged after the fact: the next calls wait for what this one overdrew.
			l.tokens.ReserveN(time.Now(), min(used-estimate, l.tokens.Burst()))
		}
		free()
	}, nil
}

// estimateTokens guesses a request's prompt tokens before it is sent: about four characters a
// token for the text models read, which is close enough to pace a tokens-per-minute limit.
func estimateTokens(req sdk.GenerateRequest) int {
	n := 0
	for _, m := range req.Messages {
		n += len(m.Content)/4 + 4
	}
	return max(n, 1)
}
