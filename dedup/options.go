package dedup

import (
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
	"github.com/redislock-go/redislock/observe"
)

// Defaults, all in one place.
const (
	// DefaultLease is the lease a running job holds, renewed every third
	// of it while the job runs: how long a crashed worker's job stays
	// locked before another worker may run it. 10 s recovers a crashed
	// worker's jobs within seconds, as the command's default lease; a live
	// worker loses its job's lock only when two renewals in a row fail
	// (its backend unreachable for 3.3 to 6.6 s, by when the outage
	// begins). A longer WithLease rides out longer outages and delays the
	// recovery as much.
	DefaultLease = 10 * time.Second
	// DefaultRetention is how long a job's outcome is kept (UntilDone and
	// UntilDoneOrFailed): for this long after it ran, a repeat of its id
	// gets the stored outcome instead of a run.
	DefaultRetention = 24 * time.Hour
	// DefaultPrefix is the namespace of a job's id in its lock key and
	// record key (see WithPrefix).
	DefaultPrefix = "dedup:"
)

// A Scope says which outcomes of a job keep its id from running again,
// and for how long.
type Scope struct {
	failed bool          // failures are recorded too
	period time.Duration // > 0: every outcome, for period after the run began
}

var (
	// UntilDone records a job that returned without error; a failed one
	// can run again at once. The default.
	UntilDone = Scope{}
	// UntilDoneOrFailed records every outcome: a repeat of a failed job
	// gets a *FailedError with the failure's message instead of a run.
	UntilDoneOrFailed = Scope{failed: true}
)

// ForPeriod records every outcome, success or failure, for d after the
// run began: at most one run per id per period. d must be at least 1 ms.
func ForPeriod(d time.Duration) Scope { return Scope{failed: true, period: d} }

// String names the scope.
func (s Scope) String() string {
	switch {
	case s.period > 0:
		return "ForPeriod(" + s.period.String() + ")"
	case s.failed:
		return "UntilDoneOrFailed"
	}
	return "UntilDone"
}

// An Option configures a Group. Invalid values make New fail with an error
// matching lease.ErrInvalidArgument; none is silently corrected.
type Option func(*options)

type options struct {
	lease        time.Duration
	renew        time.Duration // 0: a third of the lease
	scope        Scope
	retention    time.Duration
	retentionSet bool
	retry        lease.RetryStrategy // nil: duplicates do not wait
	holder       string
	prefix       string
	clock        lease.Clock
	observers    []observe.JobObserver

	err error // the first invalid value
}

func defaultOptions() options {
	return options{
		lease:     DefaultLease,
		scope:     UntilDone,
		retention: DefaultRetention,
		prefix:    DefaultPrefix,
		clock:     realClock{},
	}
}

func (o *options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// WithLease sets the lease a running job holds. Default: DefaultLease
// (10 s). It is renewed every third of it while the job runs (see
// WithRefreshInterval), so it bounds only how long a crashed worker keeps
// its job locked, and how long an outage a live worker's renewals ride
// out. It must leave validity after the backend's drift
// (backend.CheckTTL).
func WithLease(d time.Duration) Option {
	return func(o *options) {
		o.fail(backend.CheckTTL(d, lease.DefaultDriftFactor))
		o.lease = d
	}
}

// WithRefreshInterval sets how often a running job's lease is renewed.
// Default: a third of the lease. It must be positive and shorter than the
// lease less drift.
func WithRefreshInterval(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.fail(lease.Invalid("refresh interval %v must be positive", d))
		}
		o.renew = d
	}
}

// WithScope sets which outcomes are recorded: UntilDone (the default),
// UntilDoneOrFailed or ForPeriod(d).
func WithScope(s Scope) Option {
	return func(o *options) {
		if s.period < 0 || s.period > 0 && s.period < time.Millisecond {
			o.fail(lease.Invalid("ForPeriod(%v): the period must be at least 1ms", s.period))
		}
		o.scope = s
	}
}

// WithRetention sets how long an outcome is kept in the UntilDone and
// UntilDoneOrFailed scopes. Default: DefaultRetention (24 h). 0 keeps it
// without expiry. It must be 0 or at least 1 ms, and cannot be combined
// with ForPeriod, whose period is its retention.
func WithRetention(d time.Duration) Option {
	return func(o *options) {
		if d < 0 || d > 0 && d < time.Millisecond {
			o.fail(lease.Invalid("retention %v must be 0 or at least 1ms", d))
		}
		o.retention, o.retentionSet = d, true
	}
}

// WithRetry makes a duplicate that finds its job running wait for the run
// to end, and return its outcome (or run the job itself, if the run failed
// in the UntilDone scope or its worker crashed), until its ctx ends or s
// gives up (an *InProgressError then). s bounds each wait, as Obtain's
// retry strategy: a backend that wakes waiters when a lock is released
// (redislock in single mode, leasetest.Memory) ends it sooner; a
// backend's own wait limit (lease.WaitLimitError) only starts another
// wait. Default: no waiting, the duplicate gets an *InProgressError at
// once. s must not be nil.
func WithRetry(s lease.RetryStrategy) Option {
	return func(o *options) {
		o.fail(lease.CheckRetry(s))
		o.retry = s
	}
}

// WithHolder records id (a worker's name) on the lock of every job the
// Group runs, where an *InProgressError reports it. Default: none. At most
// lease.MaxHolderLen bytes.
func WithHolder(id string) Option {
	return func(o *options) {
		o.fail(lease.CheckHolder(id))
		o.holder = id
	}
}

// WithPrefix sets the namespace of the Group's job ids: a job's lock key
// and record key are lease.Key(prefix, id), "dedup:|invoice-42" by default.
// Default: DefaultPrefix ("dedup:"). Give each kind of job its own prefix
// when ids can repeat across kinds: Groups with different prefixes never
// share a key, whatever their ids (prefix "dedup:" with id "email:1" and
// prefix "dedup:email:" with id "1" are two jobs). Any string, even empty.
func WithPrefix(p string) Option {
	return func(o *options) { o.prefix = p }
}

// WithClock sets the clock that ForPeriod measures a run's age on:
// leasetest.FakeClock in tests, with a leasetest.Memory on the same
// clock. Default: the real clock. It must not be nil.
func WithClock(c lease.Clock) Option {
	return func(o *options) {
		if c == nil {
			o.fail(lease.Invalid("nil Clock"))
			return
		}
		o.clock = c
	}
}

// apply returns the options set by opts over the defaults, checked.
func apply(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return options{}, o.err
	}
	if o.scope.period > 0 && o.retentionSet {
		return options{}, lease.Invalid("WithRetention with %v: the period is the retention", o.scope)
	}
	if _, err := lease.RenewInterval(o.lease, o.renew, lease.DefaultDriftFactor); err != nil {
		return options{}, err
	}
	return o, nil
}

type realClock struct{}

func (realClock) Now() time.Time                                  { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) lease.Timer { return time.AfterFunc(d, f) }
