package semaphore

import (
	"strings"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
)

// Defaults, all in one place.
const (
	// DefaultPrefix is put in front of every Redis key of a semaphore:
	// the locks' default prefix, whose keys a semaphore's never meet.
	DefaultPrefix = "redislock:"
	// DefaultQueueTTL is how long a waiter's place in the queue lasts
	// without the waiter renewing it.
	DefaultQueueTTL = 3 * time.Second
	// DefaultReleaseTimeout bounds Release and the withdrawal of a request
	// that gave up.
	DefaultReleaseTimeout = 3 * time.Second
	// MaxLimit is the largest number of slots a semaphore may have.
	MaxLimit = 10000
	// minFenceTTL is the least time the fence counter outlives the last
	// grant (it outlives it by the grant's TTL, at least this). Fences are
	// max(counter + 1, server µs), so once it expires the clock takes over.
	minFenceTTL = time.Second
	// subscribeTimeout bounds the wait for the confirmation of the wake
	// channel's subscription; without one, waiters poll.
	subscribeTimeout = 2 * time.Second
)

// An Option configures a Semaphore. Invalid values make New return an
// error matching lease.ErrInvalidArgument.
type Option func(*options)

type options struct {
	prefix         string
	holder         string
	drift          float64
	queueTTL       time.Duration
	releaseTimeout time.Duration
	observers      []observe.Observer
	err            error

	hook func(event, token string) // the package's tests (export_test.go)
}

func defaults() options {
	return options{
		prefix:         DefaultPrefix,
		drift:          lease.DefaultDriftFactor,
		queueTTL:       DefaultQueueTTL,
		releaseTimeout: DefaultReleaseTimeout,
	}
}

func (o *options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// WithPrefix sets the namespace in front of the semaphore's Redis keys
// (default DefaultPrefix). It may not contain '{' or '}', which would
// break the hash tag that keeps a semaphore in one Cluster slot. Two
// semaphores with different prefixes or names never share a key, nor does
// a semaphore share one with a lock (redislock.WithPrefix), whatever the
// prefixes.
func WithPrefix(p string) Option {
	return func(o *options) {
		if strings.ContainsAny(p, "{}") {
			o.fail(lease.Invalid("semaphore: prefix %q contains '{' or '}'", p))
		}
		o.prefix = p
	}
}

// WithHolder records id as the holder of this Semaphore's permits,
// readable by Inspect ("host:pid", a service name). Default: none. At most
// lease.MaxHolderLen bytes.
func WithHolder(id string) Option {
	return func(o *options) {
		o.fail(lease.CheckHolder(id))
		o.holder = id
	}
}

// WithDriftFactor sets the share of the TTL a permit's validity gives up
// for clock drift between client and server; 2 ms are always added.
// Default lease.DefaultDriftFactor (0.01). It must be in [0, 1).
func WithDriftFactor(f float64) Option {
	return func(o *options) {
		if f < 0 || f >= 1 {
			o.fail(lease.Invalid("semaphore: drift factor %v is not in [0, 1)", f))
		}
		o.drift = f
	}
}

// WithQueueTTL sets how long a waiter's place in the queue lasts without
// the waiter renewing it (default DefaultQueueTTL). Waiters renew it at
// every attempt and wait at most a third of it between attempts, so a
// waiter that died holds up the ones behind it for at most this long after
// its last attempt (a server clock stepped back meanwhile adds at most the
// time between two calls: see the package doc, Server time). It must be at
// least 30 ms.
func WithQueueTTL(d time.Duration) Option {
	return func(o *options) {
		if d < 30*time.Millisecond {
			o.fail(lease.Invalid("semaphore: queue TTL %v is below 30ms", d))
		}
		o.queueTTL = d
	}
}

// WithReleaseTimeout bounds Release and the withdrawal of a request that
// gave up (default DefaultReleaseTimeout); these run on a context
// detached from the caller's cancellation. It must be positive.
func WithReleaseTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.fail(lease.Invalid("semaphore: release timeout %v must be positive", d))
		}
		o.releaseTimeout = d
	}
}
