package study

import (
	"fmt"
	"sync"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
)

// meter enforces one unit's budget (sdk.Budget, 0: unlimited) and keeps what the unit spent. A
// call starts only while every limit still has room; the call that crosses a limit in tokens or
// dollars is kept (its size is known only after it), and every later one fails with
// sdk.ErrBudgetExhausted.
type meter struct {
	mu     sync.Mutex
	budget sdk.Budget
	start  time.Time
	now    func() time.Time

	gens, evs int
	tokens    int64
	cost      float64
}

func newMeter(b sdk.Budget, now func() time.Time) *meter {
	if now == nil {
		now = time.Now
	}
	return &meter{budget: b, start: now(), now: now}
}

// common checks the limits every call is under: tokens, dollars, wall time. Called with mu held.
func (m *meter) common() error {
	b := m.budget
	switch {
	case b.Tokens > 0 && m.tokens >= b.Tokens:
		return fmt.Errorf("%w: %d of %d tokens used", sdk.ErrBudgetExhausted, m.tokens, b.Tokens)
	case b.CostUSD > 0 && m.cost >= b.CostUSD:
		return fmt.Errorf("%w: $%.4f of $%.4f spent", sdk.ErrBudgetExhausted, m.cost, b.CostUSD)
	case b.Seconds > 0 && m.now().Sub(m.start).Seconds() >= b.Seconds:
		return fmt.Errorf("%w: %.0f of %.0f seconds used", sdk.ErrBudgetExhausted, m.now().Sub(m.start).Seconds(), b.Seconds)
	}
	return nil
}

// generate reserves n generations.
func (m *meter) generate(n int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.budget.Generations; b > 0 && m.gens+n > b {
		return fmt.Errorf("%w: %d of %d generations used, %d more asked", sdk.ErrBudgetExhausted, m.gens, b, n)
	}
	if err := m.common(); err != nil {
		return err
	}
	m.gens += n
	return nil
}

// spent adds a reply's tokens and price.
func (m *meter) spent(u sdk.Usage, usd float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tokens += u.PromptTokens + u.CompletionTokens
	m.cost += usd
}

// evaluate reserves an evaluation and returns its number in the unit (1, 2, ...).
func (m *meter) evaluate() (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.budget.Evaluations; b > 0 && m.evs+1 > b {
		return 0, fmt.Errorf("%w: all %d evaluations used", sdk.ErrBudgetExhausted, b)
	}
	if err := m.common(); err != nil {
		return 0, err
	}
	m.evs++
	return m.evs, nil
}

// totals is what the unit spent.
func (m *meter) totals() (gens, evs int, tokens int64, cost float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gens, m.evs, m.tokens, m.cost
}
