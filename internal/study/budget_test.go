package study

import (
	"errors"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// Each of a unit's five limits stops the call that would go past it, with ErrBudgetExhausted,
// and nothing before it.
func TestMeterEnforcesEveryLimit(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	t.Run("generations", func(t *testing.T) {
		m := newMeter(sdk.Budget{Generations: 3}, clock)
		if err := m.generate(2); err != nil {
			t.Fatal(err)
		}
		if err := m.generate(2); !errors.Is(err, sdk.ErrBudgetExhausted) {
			t.Fatalf("2 more past 3: %v", err)
		}
		if err := m.generate(1); err != nil {
			t.Fatalf("the third generation: %v", err)
		}
	})
	t.Run("evaluations", func(t *testing.T) {
		m := newMeter(sdk.Budget{Evaluations: 2}, clock)
		for i := 1; i <= 2; i++ {
			if n, err := m.evaluate(); err != nil || n != i {
				t.Fatalf("evaluation %d: %d %v", i, n, err)
			}
		}
		if _, err := m.evaluate(); !errors.Is(err, sdk.ErrBudgetExhausted) {
			t.Fatalf("third evaluation: %v", err)
		}
	})
	t.Run("tokens", func(t *testing.T) {
		m := newMeter(sdk.Budget{Tokens: 100}, clock)
		if err := m.generate(1); err != nil {
			t.Fatal(err)
		}
		m.spent(sdk.Usage{PromptTokens: 60, CompletionTokens: 30}, 0)
		if err := m.generate(1); err != nil {
			t.Fatalf("90 of 100 tokens used: %v", err)
		}
		m.spent(sdk.Usage{PromptTokens: 60, CompletionTokens: 30}, 0)
		if err := m.generate(1); !errors.Is(err, sdk.ErrBudgetExhausted) {
			t.Fatalf("180 of 100 tokens: %v", err)
		}
		if _, err := m.evaluate(); !errors.Is(err, sdk.ErrBudgetExhausted) {
			t.Fatalf("an evaluation past the token budget: %v", err)
		}
	})
	t.Run("dollars", func(t *testing.T) {
		m := newMeter(sdk.Budget{CostUSD: 0.01}, clock)
		m.spent(sdk.Usage{}, 0.004)
		if err := m.generate(1); err != nil {
			t.Fatal(err)
		}
		m.spent(sdk.Usage{}, 0.007)
		if err := m.generate(1); !errors.Is(err, sdk.ErrBudgetExhausted) {
			t.Fatalf("$0.011 of $0.01: %v", err)
		}
	})
	t.Run("seconds", func(t *testing.T) {
		start := now
		cur := start
		m := newMeter(sdk.Budget{Seconds: 10}, func() time.Time { return cur })
		cur = start.Add(9 * time.Second)
		if err := m.generate(1); err != nil {
			t.Fatalf("at 9 of 10 s: %v", err)
		}
		cur = start.Add(10 * time.Second)
		if err := m.generate(1); !errors.Is(err, sdk.ErrBudgetExhausted) {
			t.Fatalf("at 10 of 10 s: %v", err)
		}
	})
	t.Run("unlimited", func(t *testing.T) {
		m := newMeter(sdk.Budget{}, clock)
		for range 100 {
			m.spent(sdk.Usage{PromptTokens: 1e6}, 100)
			if err := m.generate(5); err != nil {
				t.Fatal(err)
			}
			if _, err := m.evaluate(); err != nil {
				t.Fatal(err)
			}
		}
		gens, evs, tokens, cost := m.totals()
		if gens != 500 || evs != 100 || tokens != 1e8 || cost != 1e4 {
			t.Errorf("totals %d %d %d %v", gens, evs, tokens, cost)
		}
	})
}

// A study's wall time counts time two units ran side by side once.
func TestWallTimeIsTheUnion(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	got := wallTime([][2]time.Time{{at(10), at(20)}, {at(0), at(5)}, {at(15), at(30)}, {at(40), at(41)}})
	if got != 26 {
		t.Errorf("wall time %v, want 26", got)
	}
	if wallTime(nil) != 0 {
		t.Error("no intervals, some time")
	}
}

func TestStudyLimit(t *testing.T) {
	l := &studyLimit{limit: StudyBudget{CostUSD: 1}, start: time.Now()}
	if l.reached() != "" {
		t.Fatal("reached before any spend")
	}
	l.add(time.Now(), time.Now(), 1.5)
	if l.reached() == "" {
		t.Fatal("not reached at $1.50 of $1")
	}
	old := time.Now().Add(-time.Hour)
	l = &studyLimit{limit: StudyBudget{Seconds: 600}, start: time.Now(), intervals: [][2]time.Time{{old, old.Add(11 * time.Minute)}}}
	if l.reached() == "" {
		t.Fatal("an earlier run's 11 minutes do not count against 10")
	}
}

func TestETA(t *testing.T) {
	if eta(10, 0, 0, 4) != 0 {
		t.Error("an estimate before any unit finished")
	}
	// 2 units took 20 s in all: 10 s each; 8 left, 4 at a time: 20 s.
	if got := eta(8, 2, 20*time.Second, 4); got != 20*time.Second {
		t.Errorf("eta %v", got)
	}
	if got := eta(1, 2, 20*time.Second, 4); got != 10*time.Second {
		t.Errorf("one left: %v", got)
	}
}

// A resumed study counts what its earlier runs spent, cached replies priced like fresh ones, and
// the union of its finished units' run times.
func TestStudyLimitCountsEarlierRuns(t *testing.T) {
	st := openStore(t)
	id := "0123456789abcdef0123"
	for _, cached := range []bool{false, true} {
		if err := st.PutCall(&store.CallRecord{Study: id, Task: "a", Model: "m", Cached: cached, Usage: sdk.Usage{PromptTokens: 100},
			At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	price := func(c store.CallRecord) float64 { return float64(c.Usage.PromptTokens) / 100 } // $1 a call
	l, err := newStudyLimit(st, id, StudyBudget{CostUSD: 2}, price)
	if err != nil {
		t.Fatal(err)
	}
	if why := l.reached(); why == "" {
		t.Errorf("$2 of $2 spent in an earlier run, not reached (cost %v)", l.cost)
	}
	l, _ = newStudyLimit(st, id, StudyBudget{CostUSD: 2.5}, price)
	if why := l.reached(); why != "" {
		t.Errorf("$2 of $2.50: %s", why)
	}
	past := time.Now().Add(-time.Hour)
	if err := st.PutUnit(store.Unit{Study: id, Task: "x/a", StartedAt: past, FinishedAt: past.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	l, _ = newStudyLimit(st, id, StudyBudget{Seconds: 59}, price)
	if l.reached() == "" {
		t.Error("an earlier run's minute does not count against 59 s")
	}
	l, _ = newStudyLimit(st, id, StudyBudget{Seconds: 61}, price)
	if why := l.reached(); why != "" {
		t.Errorf("a minute of 61 s: %s", why)
	}
}
