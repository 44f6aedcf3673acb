package redislock

import (
	"strings"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
	"github.com/redislock-go/redislock/observe"
)

// A ClientOption configures a Client: given to New or NewQuorum. Every
// Option is a ClientOption too, and given there it sets the default for all
// the Client's calls. Options that only make sense for a Client as a whole
// (WithObserver, WithLogger) are ClientOptions only: a call does not accept
// them, and such a program does not compile.
type ClientOption interface {
	applyClient(*config)
}

// An Option configures one call (Obtain, ObtainMulti, Run, RunMulti,
// overriding the Client's default) or, given to New or NewQuorum, the
// default for all calls. Invalid values are reported as errors matching
// ErrInvalidArgument by the call that uses them (for New: by every call of
// the Client); they are never silently corrected.
type Option interface {
	ClientOption
	apply(*options)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options)      { f(o) }
func (f optionFunc) applyClient(c *config) { f(&c.defaults) }

type clientOptionFunc func(*config)

func (f clientOptionFunc) applyClient(c *config) { f(c) }

// config is what ClientOptions set.
type config struct {
	defaults  options // the defaults of every call
	observers []observe.Observer
	// wallClock is the wall clock that quorum mode proposes fences from
	// (time.Now; tests skew it with withWallClock).
	wallClock func() time.Time
}

// options is what Options set for one call.
type options struct {
	retry           RetryStrategy
	prefix          string
	driftFactor     float64
	nodeTimeout     time.Duration // 0: derived from the TTL
	refreshInterval time.Duration // 0: TTL/3
	releaseTimeout  time.Duration
	maxWait         time.Duration // 0: DefaultMaxWait
	notify          bool          // notified waiting (wait.go)
	autoPipeline    bool          // batch calls under load (internal/nodes)
	sharded         bool          // SPUBLISH/SSUBSCRIBE instead of PUBLISH/SUBSCRIBE
	fair            bool          // FIFO queue (fair.go)
	queueTTL        time.Duration // fair mode: lifetime of an unrefreshed queue entry
	holder          any           // the holder identity (a string), boxed once: a script argument
	replicas        int           // WithReplicas: acknowledgements each grant and refresh waits for (0: none)
	replicaTimeout  time.Duration // WithReplicas: how long it waits for them
	errs            []error       // invalid option values, reported on use
}

// Defaults, all in one place.
const (
	DefaultPrefix         = "redislock:"
	DefaultDriftFactor    = lease.DefaultDriftFactor
	DefaultReleaseTimeout = 3 * time.Second
	DefaultQueueTTL       = 3 * time.Second
	DefaultMaxWait        = lease.DefaultMaxWait

	// MaxTTL is the longest TTL Obtain, Run and Refresh accept
	// (lease.MaxTTL, 10 years): a longer one is an error matching
	// ErrInvalidArgument, so that ValidUntil always carries Go's
	// monotonic clock reading.
	MaxTTL = lease.MaxTTL

	// minQueueTTL is the shortest WithQueueTTL.
	minQueueTTL = 10 * time.Millisecond
)

func defaultOptions() options {
	return options{
		retry:          NoRetry(),
		prefix:         DefaultPrefix,
		driftFactor:    DefaultDriftFactor,
		releaseTimeout: DefaultReleaseTimeout,
		notify:         true,
		autoPipeline:   true,
		queueTTL:       DefaultQueueTTL,
		holder:         "",
	}
}

func (o *options) add(opts []Option) {
	for _, opt := range opts {
		if opt != nil {
			opt.apply(o)
		}
	}
}

func (o *options) validate() error {
	if len(o.errs) > 0 {
		return o.errs[0]
	}
	return nil
}

func (o *options) fail(err error) { o.errs = append(o.errs, err) }

// newConfig applies opts over the defaults.
func newConfig(opts []ClientOption) config {
	c := config{defaults: defaultOptions(), wallClock: time.Now}
	for _, opt := range opts {
		if opt != nil {
			opt.applyClient(&c)
		}
	}
	return c
}

// WithRetry sets how Obtain retries while the lock is held by someone else.
// Default: NoRetry, a single attempt. Retries never outlast the context; a
// context without deadline is bounded by WithMaxWait.
func WithRetry(s RetryStrategy) Option {
	return optionFunc(func(o *options) {
		if err := lease.CheckRetry(s); err != nil {
			o.fail(err)
			return
		}
		o.retry = s
	})
}

// WithHolder records id as the holder of the grant: readable by whoever
// finds the lock held (Client.Inspect, the redislock command's inspect) and
// by leader election's Leader. Default: "" (none). It may be at most 256
// bytes; the token is never recorded in it, and it costs the lock value its
// length in bytes.
func WithHolder(id string) Option {
	return optionFunc(func(o *options) {
		if err := lease.CheckHolder(id); err != nil {
			o.fail(err)
			return
		}
		o.holder = id
	})
}

// WithPrefix sets the namespace put in front of every Redis key the library
// writes. Default: "redislock:". It may be empty but may not contain '{' or
// '}', which would break the Cluster hash tag that keeps a lock's keys in one
// slot. Two different (prefix, key) pairs never share a Redis key.
func WithPrefix(p string) Option {
	return optionFunc(func(o *options) {
		if strings.ContainsAny(p, "{}") {
			o.fail(invalid("prefix %q contains '{' or '}'", p))
			return
		}
		o.prefix = p
	})
}

// WithDriftFactor sets the share of the TTL taken off a grant's validity for
// clock drift between client and server; 2 ms are always added. Default 0.01.
// It must be in [0, 1).
func WithDriftFactor(f float64) Option {
	return optionFunc(func(o *options) {
		if !(f >= 0 && f < 1) {
			o.fail(invalid("drift factor %v not in [0, 1)", f))
			return
		}
		o.driftFactor = f
	})
}

// WithNodeTimeout bounds each request to one node during Obtain, Refresh and
// TTL. Default: in quorum mode TTL/10, at least 50 ms but no more than the
// validity (TTL minus drift), so that a slow or dead node cannot eat the
// validity; in single mode the validity itself. It must be positive.
//
// The bound holds whatever go-redis' options (it applies a context
// deadline to the socket only with ContextTimeoutEnabled): a call the
// Client stops waiting for is left to go-redis, and what it may have
// granted is released once go-redis returns it. In single mode a call on
// context.Background() is left to go-redis' own timeouts.
func WithNodeTimeout(d time.Duration) Option {
	return positive("node timeout", d, func(o *options) { o.nodeTimeout = d })
}

// WithRefreshInterval sets how often Run renews the lock. Default: TTL/3
// (at most half the validity, TTL minus drift, for very short TTLs). It
// must be positive and shorter than the TTL minus drift; Obtain and
// ObtainMulti check it as Run and RunMulti do, so that a call one of them
// refuses is refused by all.
func WithRefreshInterval(d time.Duration) Option {
	return positive("refresh interval", d, func(o *options) { o.refreshInterval = d })
}

// WithReleaseTimeout bounds Release and the clean-up of failed or unknown
// grants. These run on a context detached from the caller's cancellation
// (it keeps the caller's values), so `defer l.Release(ctx)` still cleans up
// after ctx was cancelled. Default 3 s.
func WithReleaseTimeout(d time.Duration) Option {
	return positive("release timeout", d, func(o *options) { o.releaseTimeout = d })
}

// WithMaxWait caps how long Obtain keeps retrying a held lock when the
// caller's context has no deadline (a context deadline, when set, is used
// instead). Default: 30 s (DefaultMaxWait), long enough not to give up on a
// holder that is alive and renewing for a while. No attempt starts after
// d: the call returns within d plus the round trip of the attempt made
// before it (bounded by WithNodeTimeout), with a *WaitLimitError that
// carries the remaining TTL the last attempt saw. A caller that wants to
// wait for that lease to end calls Obtain again, or passes a context with
// a deadline. It must be positive.
func WithMaxWait(d time.Duration) Option {
	return positive("max wait", d, func(o *options) { o.maxWait = d })
}

// positive is an option that sets a duration which must be positive.
func positive(name string, d time.Duration, set func(*options)) Option {
	return optionFunc(func(o *options) {
		if d <= 0 {
			o.fail(invalid("%s %v must be positive", name, d))
			return
		}
		set(o)
	})
}

// WithNotify turns notified waiting on or off. Default: on.
//
// On, a waiter whose attempt failed subscribes to the lock's wake channel
// (one shared subscription connection per Client; see Client.Close) and
// tries again as soon as the holder releases, when the lease the failed
// attempt reported runs out, or when its backoff ends, whichever comes
// first. The retry strategy still decides how many attempts are made and
// bounds each wait, so a lost wake-up or a dead subscription connection
// costs at most one backoff. Off, waiters only sleep their backoff.
//
// It has no effect with NoRetry, which never waits, and none on a
// *redis.Ring, which always polls. Quorum mode has no pub/sub: there it only
// queues the callers of one Client that wait for the same key (the
// longest-waiting one makes the attempts, and the Client's own Release
// wakes it); releases by other Clients are found by polling.
func WithNotify(on bool) Option {
	return optionFunc(func(o *options) { o.notify = on })
}

// WithAutoPipeline sets whether calls are batched under load. Default: on.
//
// On, while more than 16 calls of the Client are in flight to one node,
// further ones go through that node's go-redis AutoPipeliner, which sends
// the calls waiting at that moment in one pipeline. It applies to nodes
// that are a *redis.Client (standalone, or a Sentinel failover client) or
// a *redis.ClusterClient (which sends one pipeline per master). go-redis
// marks AutoPipeline EXPERIMENTAL; the AutoPipeliner is
// cached by go-redis and closed with the go-redis client, and the
// AutoPipelineOptions set on that client apply. go-redis' default keeps 1
// batch in flight, so that the client and Redis take turns; with many
// callers, the options of ExampleWithAutoPipeline (2 batches in flight,
// unordered) are faster.
func WithAutoPipeline(on bool) Option {
	return optionFunc(func(o *options) { o.autoPipeline = on })
}

// WithShardedPubSub makes releases wake waiters with SPUBLISH and waiters
// listen with SSUBSCRIBE (sharded pub/sub, Redis 7+), instead of PUBLISH
// and SUBSCRIBE. Default: off.
//
// On Redis Cluster a PUBLISH is broadcast to every node, an SPUBLISH only to
// the shard that owns the key; there the Client keeps one subscription
// connection per master node that owns a waited-for key. Every client of a
// key must agree: waiters that SUBSCRIBE do not hear an SPUBLISH (they fall
// back to their backoff). Before Redis 7.0 there is no SPUBLISH: releases
// still work but wake no one, and waiters poll.
func WithShardedPubSub(on bool) Option {
	return optionFunc(func(o *options) { o.sharded = on })
}

// validUntil is the end of the validity of a lease of ttl asked for at
// start (backend.ValidUntil with the drift factor).
func (o *options) validUntil(start time.Time, ttl time.Duration) time.Time {
	return backend.ValidUntil(start, ttl, o.driftFactor)
}

// drift is the part of ttl that a grant's validity gives up for clock drift.
func (o *options) drift(ttl time.Duration) time.Duration { return lease.Drift(ttl, o.driftFactor) }

func (o *options) checkTTL(ttl time.Duration) error { return backend.CheckTTL(ttl, o.driftFactor) }

// checkCall checks a call's TTL and its renewal interval, alike for Obtain
// and Run (ObtainMulti and RunMulti): what Run would refuse, Obtain refuses
// too. It returns the renewal interval.
func (o *options) checkCall(ttl time.Duration) (interval time.Duration, err error) {
	if err := o.checkTTL(ttl); err != nil {
		return 0, err
	}
	return lease.RenewInterval(ttl, o.refreshInterval, o.driftFactor)
}
