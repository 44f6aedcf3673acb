package backend

import (
	"time"

	"github.com/redislock-go/redislock/lease/internal/errs"
	"github.com/redislock-go/redislock/lease/internal/keep"
)

// Drift is the part of a lease of ttl that its validity gives up for clock
// drift: ttl * factor + 2 ms (1 ms for the expiry precision of the backend
// plus 1 ms of minimum clock drift, as the Redlock spec does).
func Drift(ttl time.Duration, factor float64) time.Duration { return keep.Drift(ttl, factor) }

// ValidUntil is the end of the validity of a lease of ttl (rounded down to
// whole milliseconds, as backends store it) asked for at start: start +
// ttl - Drift(ttl, factor). It carries start's monotonic clock reading.
func ValidUntil(start time.Time, ttl time.Duration, factor float64) time.Time {
	return start.Add(ttl.Truncate(time.Millisecond) - Drift(ttl, factor))
}

// CheckKey returns an error matching lease.ErrInvalidArgument for an empty
// key.
func CheckKey(key string) error {
	if key == "" {
		return errs.Invalid("empty key")
	}
	return nil
}

// CheckTTL returns an error matching lease.ErrInvalidArgument for a TTL
// below 1 ms or one that leaves no validity after Drift(ttl, factor).
func CheckTTL(ttl time.Duration, factor float64) error {
	if ttl < time.Millisecond {
		return errs.Invalid("TTL %v is below 1ms", ttl)
	}
	if d := Drift(ttl, factor); ttl.Truncate(time.Millisecond) <= d {
		return errs.Invalid("TTL %v leaves no validity after drift %v", ttl, d)
	}
	return nil
}
