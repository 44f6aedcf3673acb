package pglock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// Swept is what one clean-up pass deleted.
type Swept struct {
	Leases  int64 // lease rows released or expired more than the retention ago
	Records int64 // expired records of the Store
}

// Cleanup makes one clean-up pass: it deletes at most limit lease rows
// that expired or were released more than the retention ago (WithRetention,
// default 1 h) and at most limit expired records, oldest first, skipping
// rows that others have locked. Each table is one DELETE statement. Held
// leases and live records are never touched. limit must be positive.
//
// Expired rows do no harm besides their space: a lease row past its expiry
// is taken over by the next Obtain, an expired record reads as missing.
func (c *Client) Cleanup(ctx context.Context, limit int) (Swept, error) {
	if _, err := c.callOptions(nil); err != nil {
		return Swept{}, err
	}
	if limit <= 0 {
		return Swept{}, lease.Invalid("clean-up limit %d must be positive", limit)
	}
	var s Swept
	tag, err := c.pool.Exec(ctx, c.sql.cleanLeases, limit, c.opts.retention.Milliseconds())
	if err != nil {
		return s, fmt.Errorf("redislock: clean up %s: %w", c.n.table, err)
	}
	s.Leases = tag.RowsAffected()
	tag, err = c.pool.Exec(ctx, c.sql.cleanRecords, limit)
	if err != nil {
		return s, fmt.Errorf("redislock: clean up %s records: %w", c.n.table, err)
	}
	s.Records = tag.RowsAffected()
	return s, nil
}

// A CleanupOption configures StartCleanup.
type CleanupOption func(*cleanupOptions)

type cleanupOptions struct {
	interval time.Duration
	limit    int
	report   func(Swept, error)
	err      error
}

// WithCleanupInterval sets the pause between passes. Default 1 min; it
// must be positive.
func WithCleanupInterval(d time.Duration) CleanupOption {
	return func(o *cleanupOptions) {
		if d <= 0 && o.err == nil {
			o.err = lease.Invalid("clean-up interval %v must be positive", d)
		}
		o.interval = d
	}
}

// WithCleanupLimit bounds the rows each pass deletes per table. Default
// 1000; it must be positive.
func WithCleanupLimit(n int) CleanupOption {
	return func(o *cleanupOptions) {
		if n <= 0 && o.err == nil {
			o.err = lease.Invalid("clean-up limit %d must be positive", n)
		}
		o.limit = n
	}
}

// WithCleanupReport sets a function called after every pass with what it
// deleted and its error (on the Cleaner's goroutine; keep it short).
// Default: none.
func WithCleanupReport(f func(Swept, error)) CleanupOption {
	return func(o *cleanupOptions) { o.report = f }
}

// Cleaner runs clean-up passes in the background until Close (or the
// Client's Close).
type Cleaner struct {
	c      *Client
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// StartCleanup starts a Cleaner that runs Cleanup at once and then every
// interval, each pass bounded by the limit and by a context that ends at
// the next pass. Several Clients may clean the same table: passes skip the
// rows another has locked. Invalid options are errors matching
// ErrInvalidArgument.
func (c *Client) StartCleanup(opts ...CleanupOption) (*Cleaner, error) {
	o := cleanupOptions{interval: DefaultCleanupInterval, limit: DefaultCleanupLimit}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	cl := &Cleaner{c: c, done: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, lease.ErrClosed
	}
	var ctx context.Context
	ctx, cl.cancel = context.WithCancel(c.ctx)
	c.cleaners[cl] = struct{}{}
	c.mu.Unlock()
	go cl.run(ctx, o)
	return cl, nil
}

func (cl *Cleaner) run(ctx context.Context, o cleanupOptions) {
	defer close(cl.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, o.interval)
		s, err := cl.c.Cleanup(pctx, o.limit)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if o.report != nil {
			o.report(s, err)
		}
		t.Reset(o.interval)
	}
}

// Done is closed when the Cleaner has stopped.
func (cl *Cleaner) Done() <-chan struct{} { return cl.done }

// Close stops the Cleaner and waits for a pass under way (its statements
// are cancelled).
func (cl *Cleaner) Close() error {
	cl.once.Do(func() {
		cl.cancel()
		<-cl.done
		cl.c.mu.Lock()
		delete(cl.c.cleaners, cl)
		cl.c.mu.Unlock()
	})
	return nil
}
