package stampede

import (
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
	"github.com/redislock-go/redislock/observe"
)

// Defaults, all in one place.
const (
	// DefaultLease is the lease of the lock a fill runs under; the lease
	// is renewed every third of it while the fill runs, so it bounds how
	// long a crashed filler holds up its successor, not how long a fill
	// may take.
	DefaultLease = 5 * time.Second
	// DefaultFillTimeout bounds one fill: its ctx ends after it.
	DefaultFillTimeout = 30 * time.Second
	// DefaultPrefix is the namespace of the keys the Group passes to its
	// Locker and Store (see WithPrefix), so that cache entries do not meet
	// the locks and records of other users of the same backend.
	DefaultPrefix = "stampede:"
	// DefaultMaxRefreshes bounds the early refreshes one Group runs at once.
	DefaultMaxRefreshes = 16
)

// defaultWait is how a flight waits for the lock while another process
// fills (see WithRetry): the Locker's notified waiting wakes it when the
// filler releases, and the backoff only bounds each wait in case a
// wake-up is lost.
var defaultWait = lease.ExponentialBackoff(10*time.Millisecond, 250*time.Millisecond)

// An Option configures a Group. Invalid values make New return an error
// matching lease.ErrInvalidArgument.
type Option func(*options)

type options struct {
	lockTTL      time.Duration
	fillTimeout  time.Duration
	namespace    string
	wait         lease.RetryStrategy
	holder       string
	negativeTTL  time.Duration // 0: misses are not cached
	earlyRefresh time.Duration // 0: no early refresh
	maxRefreshes int
	fillRetries  int
	onError      func(key string, err error)

	cacheObservers []observe.CacheObserver
	fillObservers  []observe.FillObserver

	hook func(event, key string) // the package's tests (export_test.go)

	err error // the first invalid value
}

func defaults() options {
	return options{
		lockTTL:      DefaultLease,
		fillTimeout:  DefaultFillTimeout,
		namespace:    DefaultPrefix,
		wait:         defaultWait,
		maxRefreshes: DefaultMaxRefreshes,
		onError:      func(string, error) {},
	}
}

func (o *options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// WithLease sets the lease of the lock a fill runs under (default
// DefaultLease). It is renewed every third of it while the fill runs;
// when the filling process dies, the others wait at most this long before
// one of them fills instead. It must leave validity after drift (at least
// a few milliseconds).
func WithLease(d time.Duration) Option {
	return func(o *options) {
		o.fail(backend.CheckTTL(d, lease.DefaultDriftFactor))
		o.lockTTL = d
	}
}

// WithFillTimeout bounds each fill (default DefaultFillTimeout): the fill's
// ctx ends after d, and the callers get the fill's error, those waiting in
// other processes too (recorded as a failure, as any failed fill's: they
// do not fill in turn). It must be positive.
func WithFillTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.fail(lease.Invalid("fill timeout %v must be positive", d))
		}
		o.fillTimeout = d
	}
}

// WithPrefix sets the namespace of the Group's keys: the key the Group
// gives its Locker and Store for a cache key is lease.Key(ns, key),
// "stampede:|user:42" by default. Groups with different prefixes never
// share a key, whatever their keys. Default DefaultPrefix; it may be
// empty.
func WithPrefix(ns string) Option {
	return func(o *options) { o.namespace = ns }
}

// WithRetry sets how a flight waits for the lock while another process
// fills (default lease.ExponentialBackoff(10ms, 250ms)). With a Locker that wakes waiters on release
// (the Redis Client's notified waiting, leasetest.Memory), the strategy
// only bounds each wait; with a polling Locker it is the polling interval.
// The wait as a whole lasts as long as the callers wait: it ends when the
// last caller's ctx ends.
func WithRetry(s lease.RetryStrategy) Option {
	return func(o *options) {
		o.fail(lease.CheckRetry(s))
		o.wait = s
	}
}

// WithHolder records id as the holder of the fill locks (lease.WithHolder),
// so that an operator inspecting a key sees who fills it. Default: none.
func WithHolder(id string) Option {
	return func(o *options) {
		o.fail(lease.CheckHolder(id))
		o.holder = id
	}
}

// WithNegativeTTL turns on negative caching: a fill that returns an error
// matching ErrMissing (the value does not exist) is cached as a miss for d,
// and every Do for the key within d returns an error matching ErrMissing
// without filling. Default: off, a miss is an error like any other. d must
// be at least 1 ms.
func WithNegativeTTL(d time.Duration) Option {
	return func(o *options) {
		if d < time.Millisecond {
			o.fail(lease.Invalid("negative TTL %v is below 1ms", d))
		}
		o.negativeTTL = d
	}
}

// WithEarlyRefresh turns on stale-while-revalidate: a Do that finds the
// value with less than d of its TTL left returns it at once and starts a
// refresh in the background, and one refresher across every process (the
// one that gets the lock) fills and stores the value again, while the
// others go on reading the current one. Default: off. d must be positive
// and shorter than the TTL passed to Do (Do reports an invalid argument
// otherwise). A refresh that fails leaves the current value in place until
// its TTL ends, and is reported to the WithErrorHandler function.
func WithEarlyRefresh(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.fail(lease.Invalid("early refresh %v must be positive", d))
		}
		o.earlyRefresh = d
	}
}

// WithMaxRefreshes bounds the early refreshes the Group runs at once
// (default DefaultMaxRefreshes); when all are busy, a key due for refresh
// is left for a later Do, or for another process. n must be at least 1.
func WithMaxRefreshes(n int) Option {
	return func(o *options) {
		if n < 1 {
			o.fail(lease.Invalid("max refreshes %d must be at least 1", n))
		}
		o.maxRefreshes = n
	}
}

// WithFillRetries makes a flight fill again, up to n more times, after a
// fill failed, whether the fill ran here or in another process (whose
// failure its callers would otherwise get), before it gives its callers
// the error. Default 0: callers get the error of the fill they waited for.
// n may not be negative.
func WithFillRetries(n int) Option {
	return func(o *options) {
		if n < 0 {
			o.fail(lease.Invalid("fill retries %d may not be negative", n))
		}
		o.fillRetries = n
	}
}

// WithErrorHandler sets a function that is told about errors no caller
// receives: a failed early refresh, and a value that was filled and handed
// to the callers but could not be stored. Default: none. It is called from
// the Group's goroutines and must not block for long.
func WithErrorHandler(f func(key string, err error)) Option {
	return func(o *options) {
		if f == nil {
			o.fail(lease.Invalid("nil error handler"))
		}
		o.onError = f
	}
}
