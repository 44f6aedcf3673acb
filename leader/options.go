package leader

import (
	"crypto/rand"
	"fmt"
	"os"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
	"github.com/redislock-go/redislock/observe"
)

// Defaults, all in one place.
const (
	// DefaultLease is the lease a leader holds and renews: how long the
	// backend keeps a crashed leader's lock before another candidate can
	// take it.
	DefaultLease = 15 * time.Second
	// DefaultRefreshShare is the default renewal interval, as a share of the
	// lease: a third, so that two renewals can fail before the lease ends.
	DefaultRefreshShare = 3
	// DefaultMarginShare is the default margin, as a share of the lease: a
	// tenth. The leader's context is cancelled this long before the
	// validity its lock last confirmed ends, unless a renewal gets through
	// first.
	DefaultMarginShare = 10
	// DefaultRetryPeriod bounds each wait of a candidate between attempts
	// (the default WithRetry is lease.LinearBackoff(DefaultRetryPeriod)). A
	// backend that wakes waiters when a lock is released or expires
	// (redislock in single mode, leasetest.Memory) wakes them sooner.
	DefaultRetryPeriod = time.Second
	// DefaultObserveInterval is how often Observe (and Run's OnNewLeader)
	// asks the backend who leads.
	DefaultObserveInterval = time.Second
	// DefaultPrefix is the namespace of the election's name in its lock
	// key (see WithPrefix).
	DefaultPrefix = "leader:"
)

// An Option configures an Election. Invalid values make New fail with an
// error matching lease.ErrInvalidArgument; none is silently corrected.
type Option func(*options)

type options struct {
	holder    string
	lease     time.Duration
	renew     time.Duration // 0: lease / DefaultRefreshShare
	margin    time.Duration
	marginSet bool // margin was set (0 is a valid margin)
	retry     lease.RetryStrategy
	observe   time.Duration
	prefix    string
	clock     lease.Clock
	observers []observe.TermObserver

	err error // the first invalid value
}

func defaultOptions() options {
	return options{
		lease:   DefaultLease,
		retry:   lease.LinearBackoff(DefaultRetryPeriod),
		observe: DefaultObserveInterval,
		prefix:  DefaultPrefix,
		clock:   realClock{},
	}
}

func (o *options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// WithHolder sets the candidate's identity, recorded as the holder of the
// election's lock, which Leader, Observe and OnNewLeader report while it
// leads: a host name, a pod name. Default: "<hostname>:<pid>:<random>",
// distinct for every Election. It must be non-empty and at most
// lease.MaxHolderLen bytes.
func WithHolder(id string) Option {
	return func(o *options) {
		if id == "" {
			o.fail(lease.Invalid("empty holder identity"))
		}
		o.fail(lease.CheckHolder(id))
		o.holder = id
	}
}

// WithLease sets the lease the leader holds. Default: DefaultLease (15 s).
// A crashed or partitioned leader's lock is free again at most this long
// after its last renewal. It must leave validity after the backend's
// drift (backend.CheckTTL).
func WithLease(d time.Duration) Option {
	return func(o *options) {
		o.fail(backend.CheckTTL(d, lease.DefaultDriftFactor))
		o.lease = d
	}
}

// WithRefreshInterval sets how often the leader renews its lease. Default:
// a third of the lease (DefaultRefreshShare). It must be positive, and the interval plus the
// margin must be shorter than the lease's validity (lease minus drift), so
// that a renewal comes due before the margin cancels the leader.
func WithRefreshInterval(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.fail(lease.Invalid("refresh interval %v must be positive", d))
		}
		o.renew = d
	}
}

// WithMargin sets how long before the end of its confirmed validity the
// leader's context is cancelled when no renewal has got through: time for
// the leader's work to stop before another candidate can take over.
// Default: a tenth of the lease. 0 cancels it at the validity's end (which
// is already the backend's lease less clock drift). It must not be
// negative; see WithRefreshInterval for its upper bound.
func WithMargin(d time.Duration) Option {
	return func(o *options) {
		if d < 0 {
			o.fail(lease.Invalid("margin %v must not be negative", d))
		}
		o.margin, o.marginSet = d, true
	}
}

// WithRetry sets how a candidate waits between attempts to take the lock:
// the retry strategy of its Obtain calls, whose backoff bounds each wait.
// Default: lease.LinearBackoff(DefaultRetryPeriod), 1 s. A backend that
// wakes waiters at a release or an expiry (redislock in single mode with
// notified waiting, leasetest.Memory) hands over sooner; in quorum mode,
// which has no such wake-up across clients, the backoff is how long a
// handover can take. A strategy that gives up (lease.LimitRetry) makes
// Campaign return ErrNotObtained; it must not be nil.
func WithRetry(s lease.RetryStrategy) Option {
	return func(o *options) {
		o.fail(lease.CheckRetry(s))
		o.retry = s
	}
}

// WithObserveInterval sets how often Observe, and Run for OnNewLeader, ask
// the backend who leads. Default: DefaultObserveInterval (1 s). Changes
// made by this Election itself (a win, a resignation) are reported at
// once. It must be positive.
func WithObserveInterval(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.fail(lease.Invalid("observe interval %v must be positive", d))
		}
		o.observe = d
	}
}

// WithPrefix sets the namespace of the election's name: its lock key is
// lease.Key(p, name) (Election.Key). Elections with different prefixes
// never share a key, whatever their names. Default: DefaultPrefix
// ("leader:"); any string, even empty.
func WithPrefix(p string) Option {
	return func(o *options) { o.prefix = p }
}

// WithClock sets the clock of the margin and of the candidates' and
// observers' waits: leasetest.FakeClock in tests, with a
// leasetest.Memory on the same clock. Default: the real clock. It must not
// be nil.
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
	if o.holder == "" {
		o.holder = defaultHolder()
	}
	if o.renew == 0 {
		o.renew = o.lease / DefaultRefreshShare
	}
	if !o.marginSet {
		o.margin = o.lease / DefaultMarginShare
	}
	validity := o.lease.Truncate(time.Millisecond) - lease.Drift(o.lease, lease.DefaultDriftFactor)
	if o.renew+o.margin >= validity {
		return options{}, lease.Invalid("refresh interval %v plus margin %v leave no time to renew a lease of %v (validity %v)",
			o.renew, o.margin, o.lease, validity)
	}
	return o, nil
}

func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	if len(host) > 200 { // leave room for the rest within lease.MaxHolderLen
		host = host[:200]
	}
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), rand.Text()[:8])
}

type realClock struct{}

func (realClock) Now() time.Time                                  { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) lease.Timer { return time.AfterFunc(d, f) }
