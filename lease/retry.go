package lease

import (
	"math/rand/v2"
	"time"
)

// A RetryStrategy decides whether and how long Obtain waits before trying a
// contended lock again. attempt counts the failed tries so far (1 after the
// first). Implementations must be stateless values: one strategy is shared
// by every call and goroutine that uses it. A strategy may also have a
// Validate() error method, which WithRetry calls.
type RetryStrategy interface {
	// Backoff returns the wait before the next try, or ok == false to stop.
	Backoff(attempt int) (wait time.Duration, ok bool)
}

type noRetry struct{}

func (noRetry) Backoff(int) (time.Duration, bool) { return 0, false }

// NoRetry tries once. It is the default.
func NoRetry() RetryStrategy { return noRetry{} }

type linearBackoff time.Duration

func (d linearBackoff) Backoff(int) (time.Duration, bool) { return time.Duration(d), true }

func (d linearBackoff) Validate() error {
	if d <= 0 {
		return Invalid("LinearBackoff(%v): wait must be positive", time.Duration(d))
	}
	return nil
}

// LinearBackoff waits d between tries, until the context (or the backend's
// wait limit) ends. d must be positive.
func LinearBackoff(d time.Duration) RetryStrategy { return linearBackoff(d) }

type exponentialBackoff struct{ min, max time.Duration }

func (e exponentialBackoff) Backoff(attempt int) (time.Duration, bool) {
	ceil := e.max
	if attempt < 1 {
		attempt = 1
	}
	if shift := attempt - 1; shift < 62 && e.min<<shift > 0 && e.min<<shift < e.max {
		ceil = e.min << shift
	}
	// Full jitter between min and the exponential ceiling, so that waiters
	// woken together spread out.
	return e.min + rand.N(ceil-e.min+1), true
}

func (e exponentialBackoff) Validate() error {
	if e.min <= 0 || e.max < e.min {
		return Invalid("ExponentialBackoff(%v, %v): need 0 < min <= max", e.min, e.max)
	}
	return nil
}

// ExponentialBackoff waits a random time between min and a ceiling that
// starts at min and doubles with every failed try, up to max. It needs
// 0 < min <= max.
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	return exponentialBackoff{min: min, max: max}
}

type limitRetry struct {
	s   RetryStrategy
	max int
}

func (l limitRetry) Backoff(attempt int) (time.Duration, bool) {
	if attempt > l.max {
		return 0, false
	}
	return l.s.Backoff(attempt)
}

func (l limitRetry) Validate() error {
	if l.s == nil || l.max < 0 {
		return Invalid("LimitRetry(%v, %d): need a strategy and max >= 0", l.s, l.max)
	}
	return CheckRetry(l.s)
}

// LimitRetry allows at most max retries (max+1 tries in all) of s.
func LimitRetry(s RetryStrategy, max int) RetryStrategy { return limitRetry{s: s, max: max} }
