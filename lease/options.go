package lease

import (
	"fmt"
	"time"
)

// An Option configures one call of a Locker (Obtain), of Hold or of Run.
// Invalid values are reported as errors matching ErrInvalidArgument by the
// call that uses them, never silently corrected.
type Option func(*Options)

// Options is what the Options of a call set. Backends read it with Apply.
type Options struct {
	// Retry decides how Obtain waits while the lock is held by another.
	// nil (the default) leaves it to the backend's own default, which is
	// NoRetry, one attempt, unless the backend was configured otherwise.
	Retry RetryStrategy
	// Holder is the identity the grant records, readable by Inspect:
	// "host:pid", a service name. "" (the default) leaves it to the
	// backend's default, which is none unless configured otherwise.
	Holder string
	// RefreshInterval is how often Hold and Run renew the lease. Default:
	// 0, meaning a third of the TTL (Run: at most half the validity).
	RefreshInterval time.Duration

	err error // the first invalid value, reported by Apply
}

// MaxHolderLen bounds the length of a holder identity.
const MaxHolderLen = 256

// Apply returns the Options that opts set, or the first invalid value's
// error.
func Apply(opts []Option) (Options, error) {
	var o Options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return Options{}, o.err
	}
	return o, nil
}

// WithRetry sets how Obtain retries while the lock is held by another.
func WithRetry(s RetryStrategy) Option {
	return func(o *Options) {
		o.fail(CheckRetry(s))
		o.Retry = s
	}
}

// WithHolder records id as the holder of the grant (Info.Holder); at most
// MaxHolderLen bytes.
func WithHolder(id string) Option {
	return func(o *Options) {
		o.fail(CheckHolder(id))
		o.Holder = id
	}
}

func (o *Options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// WithRefreshInterval sets how often Hold and Run renew the lease; it must
// be positive and shorter than the TTL minus drift.
func WithRefreshInterval(d time.Duration) Option {
	return func(o *Options) {
		if d <= 0 {
			o.fail(Invalid("refresh interval %v must be positive", d))
		}
		o.RefreshInterval = d
	}
}

// CheckHolder returns an error matching ErrInvalidArgument for a holder
// identity longer than MaxHolderLen bytes.
func CheckHolder(id string) error {
	if len(id) > MaxHolderLen {
		return Invalid("holder identity of %d bytes is longer than %d", len(id), MaxHolderLen)
	}
	return nil
}

// DefaultDriftFactor is the share of a TTL that a grant's validity gives up
// for clock drift, unless a backend is configured otherwise.
const DefaultDriftFactor = 0.01

// driftFloor is added to every drift: 1 ms for the expiry precision of the
// backend plus 1 ms of minimum clock drift, as the Redlock spec does.
const driftFloor = 2 * time.Millisecond

// Drift is the part of a lease of ttl that its validity gives up for clock
// drift: ttl * factor + 2 ms.
func Drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + driftFloor
}

// ValidUntil is the end of the validity of a lease of ttl (rounded down to
// whole milliseconds, as backends store it) asked for at start: start +
// ttl - Drift(ttl, factor). It carries start's monotonic clock reading.
func ValidUntil(start time.Time, ttl time.Duration, factor float64) time.Time {
	return start.Add(ttl.Truncate(time.Millisecond) - Drift(ttl, factor))
}

// Expired is ErrGrantExpired for a lease of ttl asked for at start and
// confirmed only at now, after its validity: the message says how long the
// call took and how much validity the TTL leaves, so that a TTL too short
// for the round trips it meets says so.
func Expired(start, now time.Time, ttl time.Duration, factor float64) error {
	return fmt.Errorf("%w: the call took %v, more than the %v of validity a TTL of %v leaves after drift (use a longer TTL)",
		ErrGrantExpired, now.Sub(start).Round(time.Microsecond), ttl.Truncate(time.Millisecond)-Drift(ttl, factor), ttl)
}

// CheckKey returns an error matching ErrInvalidArgument for an empty key.
func CheckKey(key string) error {
	if key == "" {
		return Invalid("empty key")
	}
	return nil
}

// MinValidity is the least validity a TTL must leave after drift: Redis
// (and PostgreSQL here) keeps expiries to the millisecond, so a shorter
// validity ends before the backend can tell it from an expired lease, and
// no round trip fits in it.
const MinValidity = time.Millisecond

// CheckTTL returns an error matching ErrInvalidArgument for a TTL below
// 1 ms or one too short to be useful: one that leaves less than
// MinValidity after Drift(ttl, factor).
func CheckTTL(ttl time.Duration, factor float64) error {
	if ttl < time.Millisecond {
		return Invalid("TTL %v is below 1ms", ttl)
	}
	d := Drift(ttl, factor)
	if v := ttl.Truncate(time.Millisecond) - d; v < MinValidity {
		return Invalid("TTL %v is too short: it leaves %v of validity after drift %v, less than %v", ttl, max(v, 0), d, MinValidity)
	}
	return nil
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
		return 0, Invalid("refresh interval %v leaves no time to renew a TTL of %v (validity %v after drift)", interval, ttl, validity)
	}
	return interval, nil
}
