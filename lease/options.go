package lease

import "time"

// An Option configures one call of a Locker (Obtain), of Hold or of Run.
// Invalid values are reported as errors matching ErrInvalidArgument by the
// call that uses them, never silently corrected. Backends read them with
// Apply.
type Option func(*Options)

// Options is what the Options of one call set.
type Options struct {
	// Retry decides how Obtain waits while the lock is held by another;
	// nil leaves it to the backend's own default.
	Retry RetryStrategy
	// Holder is the identity the grant records (Info.Holder); "" leaves it
	// to the backend's own default.
	Holder string
	// RefreshInterval is how often Hold and Run renew the lease; 0 means a
	// third of the TTL.
	RefreshInterval time.Duration

	err error // the first invalid value
}

// fail records err (nil: none) unless an earlier option failed.
func (o *Options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// Apply returns the Options that opts set, or the first invalid value's
// error (matching ErrInvalidArgument).
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

// MaxHolderLen bounds the length of a holder identity (WithHolder).
const MaxHolderLen = 256

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
	return func(o *Options) {
		o.fail(CheckRetry(s))
		o.Retry = s
	}
}

// WithHolder records id as the holder of the grant (Info.Holder): "host:pid",
// a service name. Default: the backend's own, which is none unless the
// backend was configured otherwise. At most MaxHolderLen bytes.
func WithHolder(id string) Option {
	return func(o *Options) {
		o.fail(CheckHolder(id))
		o.Holder = id
	}
}

// WithRefreshInterval sets how often Hold and Run renew the lease. Default:
// a third of the TTL. It must be positive and shorter than the TTL minus
// drift.
func WithRefreshInterval(d time.Duration) Option {
	return func(o *Options) {
		if d <= 0 {
			o.fail(Invalid("refresh interval %v must be positive", d))
		}
		o.RefreshInterval = d
	}
}

// CheckHolder returns an error matching ErrInvalidArgument for a holder
// identity longer than MaxHolderLen bytes: backends check their own
// holder options with it.
func CheckHolder(id string) error {
	if len(id) > MaxHolderLen {
		return Invalid("holder identity of %d bytes is longer than %d", len(id), MaxHolderLen)
	}
	return nil
}

// CheckRetry returns an error matching ErrInvalidArgument when s is nil or
// its Validate method reports it invalid: backends check their own retry
// options with it.
func CheckRetry(s RetryStrategy) error {
	if s == nil {
		return Invalid("nil RetryStrategy")
	}
	if v, ok := s.(interface{ Validate() error }); ok {
		return v.Validate()
	}
	return nil
}
