package keep

import (
	"time"

	"github.com/redislock-go/redislock/lease/internal/errs"
)

// driftFloor is added to every drift: 1 ms for the expiry precision of the
// backend plus 1 ms of minimum clock drift, as the Redlock spec does.
const driftFloor = 2 * time.Millisecond

// Drift is the part of a lease of ttl that its validity gives up for clock
// drift: ttl * factor + 2 ms.
func Drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + driftFloor
}

// RenewInterval returns how often a lease of ttl is renewed: interval, or,
// when interval is 0, a third of ttl, but at most half of the validity
// (ttl minus drift), so that every TTL that CheckTTL accepts can be
// renewed. An interval that leaves no time to renew before the validity
// ends is an error matching ErrInvalidArgument.
func RenewInterval(ttl, interval time.Duration, factor float64) (time.Duration, error) {
	validity := ttl - Drift(ttl, factor)
	if interval == 0 {
		interval = min(ttl/3, validity/2)
	}
	if interval <= 0 || interval >= validity {
		return 0, errs.Invalid("refresh interval %v leaves no time to renew a TTL of %v (validity %v after drift)", interval, ttl, validity)
	}
	return interval, nil
}

// LossLead is how far ahead of ValidUntil a lease whose renewals did not
// get through is reported lost: timers fire late, never early, so a report
// due at ValidUntil itself would come after it, by as much as the
// scheduler is late. For a lease of ttl renewed every interval it is the
// larger of 5 ms and 1% of ttl, but at most a quarter of interval and a
// quarter of the time between a renewal and the end of the lease it renews
// (ttl - interval), so that it never comes before a renewal could confirm.
func LossLead(ttl, interval time.Duration) time.Duration {
	return min(max(5*time.Millisecond, ttl/100), interval/4, (ttl-interval)/4)
}
