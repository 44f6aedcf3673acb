package redislock

import (
	"time"

	"github.com/redislock-go/redislock/lease"
)

// A RetryStrategy decides whether and how long Obtain waits before trying a
// contended lock again. attempt counts the failed tries so far (1 after the
// first). Implementations must be stateless values: one strategy is shared
// by every call and goroutine that uses it. It is lease.RetryStrategy, so
// one strategy serves every backend.
type RetryStrategy = lease.RetryStrategy

// NoRetry tries once. It is the default.
func NoRetry() RetryStrategy { return lease.NoRetry() }

// LinearBackoff waits d between tries, until the context (or WithMaxWait)
// ends. d must be positive.
func LinearBackoff(d time.Duration) RetryStrategy { return lease.LinearBackoff(d) }

// ExponentialBackoff waits a random time between min and a ceiling that
// starts at min and doubles with every failed try, up to max (full jitter,
// so that waiters woken together spread out). It needs 0 < min <= max.
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	return lease.ExponentialBackoff(min, max)
}

// LimitRetry allows at most max retries (max+1 tries in all) of s.
func LimitRetry(s RetryStrategy, max int) RetryStrategy { return lease.LimitRetry(s, max) }
