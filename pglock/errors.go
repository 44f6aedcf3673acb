package pglock

import (
	"time"

	"github.com/redislock-go/redislock/lease"
)

// The errors shared by every backend are those of package lease, so that
// errors.Is matches across backends (the Redis client re-exports the same).
var (
	// ErrNotObtained: the lock is held by someone else (after the retry
	// policy or the context ran out). Never an unreachable database.
	ErrNotObtained = lease.ErrNotObtained
	// ErrNotHeld: Refresh, Release, TTL or Verify on a grant that no
	// longer holds the lease (expired, released, taken over).
	ErrNotHeld = lease.ErrNotHeld
	// ErrLockLost: Run, RunTx or an advisory lock lost the lock while fn
	// ran; fn's context was cancelled.
	ErrLockLost = lease.ErrLockLost
	// ErrReleased: Run or RunTx whose lock was released while fn ran (fn
	// called its Release); fn's context ended then, and the lock was not
	// released again.
	ErrReleased = lease.ErrReleased
	// ErrLeaseExpired: the cause of a loss when no renewal got through
	// before the validity ended.
	ErrLeaseExpired = lease.ErrLeaseExpired
	// ErrGrantExpired: a grant or refresh was confirmed only after its
	// validity had passed; nothing is held by it.
	ErrGrantExpired = lease.ErrGrantExpired
	// ErrInvalidArgument is matched by every error about bad input.
	ErrInvalidArgument = lease.ErrInvalidArgument
	// ErrClosed: a call on a closed Client.
	ErrClosed = lease.ErrClosed
	// ErrStaleFence: a Store write carried a fence below the record's.
	ErrStaleFence = lease.ErrStaleFence
	// ErrNotFound: Store.Get of a key without a live record.
	ErrNotFound = lease.ErrNotFound
)

// RetryStrategy and its constructors are those of package lease.
type RetryStrategy = lease.RetryStrategy

// NoRetry tries once (the default).
func NoRetry() RetryStrategy { return lease.NoRetry() }

// LinearBackoff waits d between tries.
func LinearBackoff(d time.Duration) RetryStrategy { return lease.LinearBackoff(d) }

// ExponentialBackoff waits a jittered, doubling time between min and max.
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	return lease.ExponentialBackoff(min, max)
}

// LimitRetry allows at most max retries of s.
func LimitRetry(s RetryStrategy, max int) RetryStrategy { return lease.LimitRetry(s, max) }
