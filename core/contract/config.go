package contract

import (
	"fmt"
	"time"
)

// Config holds the knobs of the contract. Defaults() gives the documented defaults.
type Config struct {
	Seeds          int           `json:"seeds" mapstructure:"seeds"`
	Warmup         int           `json:"warmup" mapstructure:"warmup"`
	TimedCalls     int           `json:"timed_calls" mapstructure:"timed_calls"`
	CheckCalls     int           `json:"check_calls" mapstructure:"check_calls"`
	NoopCalls      int           `json:"noop_calls" mapstructure:"noop_calls"`
	FlushCache     bool          `json:"flush_cache" mapstructure:"flush_cache"`
	Poison         bool          `json:"poison" mapstructure:"poison"`
	CPUThreads     int           `json:"cpu_threads" mapstructure:"cpu_threads"`
	Seed           int64         `json:"seed,omitempty" mapstructure:"seed"` // 0: draw fresh seeds per evaluation
	Timeout        time.Duration `json:"timeout" mapstructure:"timeout"`
	CallTimeout    time.Duration `json:"call_timeout" mapstructure:"call_timeout"`
	CompileTimeout time.Duration `json:"compile_timeout" mapstructure:"compile_timeout"`
	LogLimit       int           `json:"log_limit" mapstructure:"log_limit"`
	KeepSamples    bool          `json:"keep_samples" mapstructure:"keep_samples"`
}

// Defaults returns the contract's default configuration.
func Defaults() Config {
	return Config{
		Seeds:          5,
		Warmup:         5,
		TimedCalls:     100,
		CheckCalls:     10,
		NoopCalls:      10,
		FlushCache:     true,
		Poison:         true,
		CPUThreads:     1,
		Timeout:        15 * time.Minute,
		CallTimeout:    2 * time.Minute,
		CompileTimeout: 10 * time.Minute,
		LogLimit:       64 << 10,
		KeepSamples:    true,
	}
}

// Validate rejects settings under which a verdict would not mean what it says.
func (c Config) Validate() error {
	switch {
	case c.Seeds < 1:
		return fmt.Errorf("contract: seeds must be at least 1 (got %d)", c.Seeds)
	case c.TimedCalls < 1:
		return fmt.Errorf("contract: timed_calls must be at least 1 (got %d)", c.TimedCalls)
	case c.Warmup < 0:
		return fmt.Errorf("contract: warmup must not be negative (got %d)", c.Warmup)
	case c.CheckCalls < 0 || c.CheckCalls > c.TimedCalls:
		return fmt.Errorf("contract: check_calls must be between 0 and timed_calls (got %d)", c.CheckCalls)
	case c.NoopCalls < 1:
		return fmt.Errorf("contract: noop_calls must be at least 1 (got %d)", c.NoopCalls)
	case c.Timeout <= 0 || c.CallTimeout <= 0 || c.CompileTimeout <= 0:
		return fmt.Errorf("contract: timeouts must be positive")
	}
	return nil
}
