package pglock

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
)

// An Option configures one call (Obtain, Run, RunTx, the advisory locks)
// or, given to New, the default of every call. Invalid values are reported
// as errors matching ErrInvalidArgument by the call that uses them, never
// silently corrected.
type Option interface {
	ClientOption
	apply(*options)
}

// A ClientOption configures a Client: given to New only. Every Option is a
// ClientOption too.
type ClientOption interface {
	applyClient(*clientOptions)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options)             { f(o) }
func (f optionFunc) applyClient(c *clientOptions) { f(&c.call) }

type clientOptionFunc func(*clientOptions)

func (f clientOptionFunc) applyClient(c *clientOptions) { f(c) }

// options are the per-call settings.
type options struct {
	retry           lease.RetryStrategy
	holder          string
	driftFactor     float64
	refreshInterval time.Duration // 0: TTL/3
	releaseTimeout  time.Duration
	maxWait         time.Duration // 0: DefaultMaxWait
	notify          bool
	errs            []error
}

// clientOptions are the settings of a Client.
type clientOptions struct {
	call        options
	table       string
	migrate     bool
	retention   time.Duration
	sessionConf *pgx.ConnConfig
	txPooler    bool
	clock       lease.Clock // tests: a client clock with an offset
	errs        []error
}

// Defaults, all in one place.
const (
	// DefaultTable is the lease table's name; the records table is named
	// after it with the suffix "_records", the fence sequence with
	// "_fence".
	DefaultTable = "redislock_leases"
	// DefaultDriftFactor is the share of a TTL that a grant's validity
	// gives up for clock drift; 2 ms are always added.
	DefaultDriftFactor = lease.DefaultDriftFactor
	// DefaultReleaseTimeout bounds Release and the background release of
	// grants whose outcome is unknown.
	DefaultReleaseTimeout = 3 * time.Second
	// DefaultMaxWait bounds a wait for a held lock when the caller's
	// context has no deadline (see WithMaxWait).
	DefaultMaxWait = lease.DefaultMaxWait
	// DefaultRetention is how long a lease row is kept after it expired or
	// was released before Cleanup deletes it (see the package doc, Fences).
	DefaultRetention = time.Hour
	// DefaultCleanupInterval and DefaultCleanupLimit are StartCleanup's
	// pace: one pass per interval, each deleting at most limit rows per
	// table.
	DefaultCleanupInterval = time.Minute
	DefaultCleanupLimit    = 1000
	// DefaultAdvisoryCheck is how often an idle advisory session
	// connection is pinged, bounding how long a silently broken connection
	// goes unnoticed. A connection the server closes is noticed at once.
	DefaultAdvisoryCheck = time.Second
)

func defaultClientOptions() clientOptions {
	return clientOptions{
		call: options{
			retry:          lease.NoRetry(),
			driftFactor:    DefaultDriftFactor,
			releaseTimeout: DefaultReleaseTimeout,
			notify:         true,
		},
		table:     DefaultTable,
		migrate:   true,
		retention: DefaultRetention,
	}
}

func (o *options) fail(err error) { o.errs = append(o.errs, err) }

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

// WithRetry sets how Obtain (and the advisory locks) retry while the lock
// is held by someone else. Default: NoRetry, a single attempt. Retries never
// outlast the context; a context without deadline is bounded by WithMaxWait.
func WithRetry(s lease.RetryStrategy) Option {
	return optionFunc(func(o *options) {
		if err := lease.CheckRetry(s); err != nil {
			o.fail(err)
			return
		}
		o.retry = s
	})
}

// WithHolder records id as the holder of the grant, in the lease row's
// holder column: readable by Inspect, by leader election's Leader, and by
// anyone with SELECT on the table. Default: "" (none). At most 256 bytes of
// valid UTF-8 without NUL.
func WithHolder(id string) Option {
	return optionFunc(func(o *options) {
		if err := lease.CheckHolder(id); err != nil {
			o.fail(err)
			return
		}
		if err := checkText("holder", id); err != nil {
			o.fail(err)
			return
		}
		o.holder = id
	})
}

// WithDriftFactor sets the share of the TTL taken off a grant's validity
// for the drift between the client's clock rate and the database's; 2 ms
// are always added. Default 0.01. It must be in [0, 1).
func WithDriftFactor(f float64) Option {
	return optionFunc(func(o *options) {
		if !(f >= 0 && f < 1) {
			o.fail(lease.Invalid("drift factor %v not in [0, 1)", f))
			return
		}
		o.driftFactor = f
	})
}

// WithRefreshInterval sets how often Run and RunTx renew the lease.
// Default: TTL/3 (at most half the validity, TTL minus drift). It must be
// positive and shorter than the TTL minus drift.
func WithRefreshInterval(d time.Duration) Option {
	return positive("refresh interval", d, func(o *options) { o.refreshInterval = d })
}

// WithReleaseTimeout bounds Release and the background release of grants
// whose outcome is unknown (a statement cut off by its context or a broken
// connection). Release runs on a context detached from the caller's
// cancellation, so `defer l.Release(ctx)` still cleans up after ctx was
// cancelled. Default 3 s.
func WithReleaseTimeout(d time.Duration) Option {
	return positive("release timeout", d, func(o *options) { o.releaseTimeout = d })
}

// WithMaxWait caps how long Obtain keeps retrying a held lock when the
// caller's context has no deadline (a context deadline, when set, is used
// instead). Default: 30 s (DefaultMaxWait), long enough not to abandon a
// holder that is alive and renewing for a while. No attempt starts after
// d: the call returns within d plus one attempt's round trip, with a
// *lease.WaitLimitError (matching ErrNotObtained) that carries the
// remaining lease the last attempt saw. It must be positive.
func WithMaxWait(d time.Duration) Option {
	return positive("max wait", d, func(o *options) { o.maxWait = d })
}

// WithNotify turns notified waiting on or off. Default: on. When on, a
// waiter whose attempt failed marks the lease row as wanted (in the same
// statement; the mark skips a row that another transaction holds locked)
// and waits on the Client's listening connection (one per Client, opened
// at the first wait, LISTEN on the table's channel); the holder's Release
// notifies in its own statement when the row is wanted,
// so the waiter tries again at once. The retry strategy still decides how
// many attempts are made and bounds each wait, so a lost notification or a
// listener that is down costs at most one backoff. Off: waiters sleep their
// backoff (polling). No effect with NoRetry, which never waits.
func WithNotify(on bool) Option {
	return optionFunc(func(o *options) { o.notify = on })
}

func positive(name string, d time.Duration, set func(*options)) Option {
	return optionFunc(func(o *options) {
		if d <= 0 {
			o.fail(lease.Invalid("%s %v must be positive", name, d))
			return
		}
		set(o)
	})
}

// WithTable sets the lease table: "name" or "schema.name", each part an
// unquoted SQL identifier (letters, digits, '_', not starting with a digit,
// at most 56 bytes), which means, as in SQL, its lower case: "Locks" is the
// table locks. The records table, the fence sequence and the indexes are
// named after it ("<name>_records", "<name>_fence", "<name>_expires",
// "<name>_records_expires") in the same schema, so a name may not end with
// "_records", "_fence" or "_expires": two tables never share a relation.
// Default "redislock_leases", in the connection's search_path. A schema
// must exist already: the library creates tables, never schemas.
func WithTable(name string) ClientOption {
	return clientOptionFunc(func(c *clientOptions) {
		if _, err := parseTable(name); err != nil {
			c.errs = append(c.errs, err)
			return
		}
		c.table = name
	})
}

// WithMigrate sets whether New creates or migrates the schema (idempotent
// DDL in one transaction, serialized by a transaction advisory lock).
// Default: on. Off: New only checks that the tables exist at the version
// this library expects (run the SQL of Schema yourself, as a role that may
// create tables).
func WithMigrate(on bool) ClientOption {
	return clientOptionFunc(func(c *clientOptions) { c.migrate = on })
}

// WithRetention sets how long Cleanup keeps a lease row after it expired or
// was released. Default 1 h. Keeping the row is what makes the fence of a
// takeover strictly higher (it is drawn under the row's lock); see the
// package doc, Fences. It must be at least 1 s.
func WithRetention(d time.Duration) ClientOption {
	return clientOptionFunc(func(c *clientOptions) {
		if d < time.Second {
			c.errs = append(c.errs, lease.Invalid("retention %v is below 1s", d))
			return
		}
		c.retention = d
	})
}

// WithSessionConfig sets where the Client opens the connections that need
// a session of their own: the listening connection of notified waiting and
// the connection of each session advisory lock. Default: the listener
// connects with the pool's connection config, and session advisory locks
// take a connection out of the pool. Use it when the pool goes through a
// transaction pooler (PgBouncer pool_mode=transaction), pointing it at
// PostgreSQL directly or at a session pooler. These connections are opened
// and closed by the Client.
func WithSessionConfig(cfg *pgx.ConnConfig) ClientOption {
	return clientOptionFunc(func(c *clientOptions) {
		if cfg == nil {
			c.errs = append(c.errs, lease.Invalid("nil session config"))
			return
		}
		c.sessionConf = cfg.Copy()
	})
}

// WithTransactionPooler declares that the pool's connections go through a
// transaction pooler, where consecutive statements may run in different
// server sessions. Lease-table locks, RunTx, transaction advisory locks and
// the Store work there unchanged. Without WithSessionConfig, session
// advisory locks are refused (ErrSessionRequired) and notified waiting is
// off (waiters poll), because LISTEN and session locks would be left on a
// server connection the pooler hands to others. Default: off; then a
// session advisory lock still checks that two statements run in the same
// server session before it locks, and refuses when they do not.
func WithTransactionPooler(on bool) ClientOption {
	return clientOptionFunc(func(c *clientOptions) { c.txPooler = on })
}

// withClock sets the client's clock (tests: a clock with an offset).
func withClock(clk lease.Clock) ClientOption {
	return clientOptionFunc(func(c *clientOptions) { c.clock = clk })
}

// validUntil is the end of the validity of a lease of ttl asked for at
// start.
func (o *options) validUntil(start time.Time, ttl time.Duration) time.Time {
	return backend.ValidUntil(start, ttl, o.driftFactor)
}
