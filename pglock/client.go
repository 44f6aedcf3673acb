package pglock

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
)

// Client obtains locks from one PostgreSQL database through a pgxpool.Pool.
// It is safe for concurrent use. Close stops its background work; it never
// closes the pool.
type Client struct {
	pool  *pgxpool.Pool
	n     names
	sql   statements
	opts  clientOptions
	clock lease.Clock

	ctx    context.Context // of the background work; cancelled by Close
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	bg       sync.WaitGroup // background releases of unknown grants, the listener, cleaners
	listener *listener      // notified waiting; started at the first wait
	cleaners map[*Cleaner]struct{}

	// Test hooks, set before use: before each notified wait (whether the
	// listener is up), and when the listener's LISTEN took effect.
	testHookWait   func(listening bool)
	testHookListen func(pid uint32)
}

// New returns a Client on pool: it checks the options, then reads the
// schema's version and, unless it is current, creates or migrates the
// tables (see Schema and WithMigrate) in one transaction.
// opts set the defaults of every call. A nil pool or an invalid option is
// an error matching ErrInvalidArgument; a table that is not this library's
// matches ErrSchema; a database that cannot be reached is returned as such.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...ClientOption) (*Client, error) {
	if pool == nil {
		return nil, lease.Invalid("nil pool")
	}
	o := defaultClientOptions()
	for _, opt := range opts {
		if opt != nil {
			opt.applyClient(&o)
		}
	}
	if len(o.errs) > 0 {
		return nil, o.errs[0]
	}
	if err := o.call.validate(); err != nil {
		return nil, err
	}
	n, err := parseTable(o.table)
	if err != nil {
		return nil, err
	}
	if err := n.migrate(ctx, pool, o.migrate); err != nil {
		return nil, err
	}
	c := &Client{pool: pool, n: n, sql: n.statements(), opts: o, clock: o.clock,
		cleaners: map[*Cleaner]struct{}{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if c.clock == nil {
		c.clock = realClock{}
	}
	return c, nil
}

type realClock struct{}

func (realClock) Now() time.Time                                  { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) lease.Timer { return time.AfterFunc(d, f) }

// Table returns the lease table's name as configured (WithTable).
func (c *Client) Table() string { return c.n.table }

// Channel returns the LISTEN channel on which releases notify waiters:
// "redislock_" and 20 hex digits of the SHA-256 of the table name. The
// payload is the SHA-256 (hex) of the key.
func (c *Client) Channel() string { return c.n.channel }

// Close stops the Client's background work and waits for it: the
// listening connection, cleaners started by StartCleanup, and background
// releases of grants whose outcome was unknown (each bounded by the
// release timeout). Later calls fail with ErrClosed; locks already
// obtained (leases and advisory locks) stay held and can still be
// refreshed and released. Obtain calls still waiting
// fall back to their backoff. It never closes the pool.
func (c *Client) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.cancel()
	}
	cleaners := make([]*Cleaner, 0, len(c.cleaners))
	for cl := range c.cleaners {
		cleaners = append(cleaners, cl)
	}
	c.mu.Unlock()
	for _, cl := range cleaners {
		_ = cl.Close()
	}
	c.bg.Wait()
	return nil
}

// background runs f on a goroutine that Close waits for; after Close, f
// runs inline.
func (c *Client) background(f func()) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		f()
		return
	}
	c.bg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.bg.Done()
		f()
	}()
}

// callOptions resolves per-call options over the Client's defaults.
func (c *Client) callOptions(opts []Option) (options, error) {
	if c == nil {
		return options{}, lease.Invalid("nil *Client")
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return options{}, lease.ErrClosed
	}
	o := c.opts.call
	if len(opts) == 0 {
		return o, nil
	}
	o.errs = nil
	o.add(opts)
	if err := o.validate(); err != nil {
		return options{}, err
	}
	return o, nil
}

func (o *options) checkTTL(ttl time.Duration) error { return backend.CheckTTL(ttl, o.driftFactor) }
