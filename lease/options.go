package lease

import (
	"time"

	"github.com/redislock-go/redislock/lease/internal/errs"
	"github.com/redislock-go/redislock/lease/internal/option"
)

// An Option configures one call of a Locker (Obtain), of Hold or of Run.
// Invalid values are reported as errors matching ErrInvalidArgument by the
// call that uses them, never silently corrected. Backends read them with
// lease/backend.Apply.
type Option func(*option.Set)

// MaxHolderLen bounds the length of a holder identity (WithHolder).
const MaxHolderLen = option.MaxHolderLen

// MaxTTL is the longest TTL a backend accepts, for a lock, a refresh and a
// pattern's lease: 10 years (87600h). A longer TTL is an error matching
// ErrInvalidArgument, returned before any call to the backend: a
// ValidUntil that far ahead would reach past the year 2157, beyond which
// Go's time.Time carries no monotonic clock reading, and a lease that long
// is a mistake of units.
const MaxTTL = 10 * 365 * 24 * time.Hour

// DefaultDriftFactor is the share of a TTL that a grant's validity gives up
// for clock drift, unless a backend is configured otherwise: validity =
// TTL - (TTL × factor + 2 ms).
const DefaultDriftFactor = 0.01

// WithRetry sets how Obtain retries while the lock is held by another.
// Default: the backend's own, which is NoRetry (one attempt) unless the
// backend was configured otherwise.
func WithRetry(s RetryStrategy) Option {
	return func(o *option.Set) {
		o.Fail(option.CheckRetry(s))
		o.Retry = s
	}
}

// WithHolder records id as the holder of the grant (Info.Holder): "host:pid",
// a service name. Default: the backend's own, which is none unless the
// backend was configured otherwise. At most MaxHolderLen bytes.
func WithHolder(id string) Option {
	return func(o *option.Set) {
		o.Fail(option.CheckHolder(id))
		o.Holder = id
	}
}

// WithRefreshInterval sets how often Hold and Run renew the lease. Default:
// a third of the TTL. It must be positive and shorter than the TTL minus
// drift.
func WithRefreshInterval(d time.Duration) Option {
	return func(o *option.Set) {
		if d <= 0 {
			o.Fail(errs.Invalid("refresh interval %v must be positive", d))
		}
		o.RefreshInterval = d
	}
}
