package backend

import (
	"fmt"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// ValidUntil is the end of the validity of a lease of ttl (rounded down to
// whole milliseconds, as backends store it) asked for at start: start +
// ttl - lease.Drift(ttl, factor). It carries start's monotonic clock
// reading for every ttl CheckTTL accepts (at most lease.MaxTTL).
func ValidUntil(start time.Time, ttl time.Duration, factor float64) time.Time {
	return start.Add(ttl.Truncate(time.Millisecond) - lease.Drift(ttl, factor))
}

// CheckKey returns an error matching lease.ErrInvalidArgument for an empty
// key.
func CheckKey(key string) error {
	if key == "" {
		return lease.Invalid("empty key")
	}
	return nil
}

// MinValidity is the least validity a TTL must leave after drift: Redis
// (and PostgreSQL here) keeps expiries to the millisecond, so a shorter
// validity ends before the backend can tell it from an expired lease, and
// no round trip fits in it.
const MinValidity = time.Millisecond

// CheckTTL returns an error matching lease.ErrInvalidArgument for a TTL
// below 1 ms, one too short to be useful (one that leaves less than
// MinValidity after lease.Drift(ttl, factor)), or one above
// lease.MaxTTL. Every backend checks a TTL with it, so that all refuse the
// same ones.
func CheckTTL(ttl time.Duration, factor float64) error {
	switch {
	case ttl < time.Millisecond:
		return lease.Invalid("TTL %v is below 1ms", ttl)
	case ttl > lease.MaxTTL:
		return lease.Invalid("TTL %v is above the longest a lease may be, %v (lease.MaxTTL)", ttl, lease.MaxTTL)
	}
	d := lease.Drift(ttl, factor)
	if v := ttl.Truncate(time.Millisecond) - d; v < MinValidity {
		return lease.Invalid("TTL %v is too short: it leaves %v of validity after drift %v, less than %v", ttl, max(v, 0), d, MinValidity)
	}
	return nil
}

// Expired is lease.ErrGrantExpired for a lease of ttl asked for at start
// and confirmed only at now, after its validity: the message says how long
// the call took and how much validity the TTL leaves, so that a TTL too
// short for the round trips it meets says so.
func Expired(start, now time.Time, ttl time.Duration, factor float64) error {
	return fmt.Errorf("%w: the call took %v, more than the %v of validity a TTL of %v leaves after drift (use a longer TTL)",
		lease.ErrGrantExpired, now.Sub(start).Round(time.Microsecond), ttl.Truncate(time.Millisecond)-lease.Drift(ttl, factor), ttl)
}
