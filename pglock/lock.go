package pglock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
)

// Obtain takes the lock on key for ttl and returns it, with a fresh random
// token and a fence (Lock.Fence) greater than that of every earlier grant
// of this key. The lease is a row of the lease table, taken by one atomic
// statement that inserts it or takes over a released or expired one; its
// expiry is computed on the database's clock. The TTL is rounded down to
// whole milliseconds.
//
// While the lock is held by someone else Obtain retries per WithRetry
// (default: no retry), waiting on a notification of the release (see
// WithNotify) or the backoff, and then returns ErrNotObtained, joined with
// ctx.Err() when ctx ended the wait. A context without deadline bounds
// retries by WithMaxWait (default 30 s), a cap: no attempt starts after it,
// and a *lease.WaitLimitError says the limit ended the wait. An attempt
// that the session's lock_timeout or statement_timeout ended while it
// waited for the key's row, locked by another transaction, counts as
// contention too (see the package doc, Server settings). A database that
// cannot be reached or answers with another error is returned as such,
// never as ErrNotObtained. Bad input (an empty key, a key or holder that is
// not valid UTF-8 or holds NUL bytes, a TTL that leaves no validity or
// exceeds lease.MaxTTL) is an error matching ErrInvalidArgument, returned
// before any statement is sent.
//
// A grant is returned only while valid: ValidUntil = request start + TTL -
// (TTL * drift factor + 2 ms), on the monotonic clock. A grant whose outcome
// is unknown (the statement was cut off by ctx or a broken connection) is
// released in the background.
func (c *Client) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error) {
	o, err := c.callOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := o.checkTTL(ttl); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, lease.Invalid("nil context")
	}
	deadline := o.waitDeadline(ctx, DefaultMaxWait)
	// NoRetry (and LimitRetry(s, 0)) never wait: nothing to be notified of.
	_, waits := o.retry.Backoff(1)
	notify := o.notify && waits && c.canListen()
	var w *waiter
	defer func() { w.stop() }()
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			if err := deadline.Expired(); err != nil {
				return nil, err // no attempt starts after the wait limit
			}
		}
		l, left, err := c.obtainOnce(ctx, key, ttl, &o, notify)
		switch {
		case err == nil:
			return l, nil
		case ctx.Err() != nil && attempt > 1:
			return nil, lease.Join(lease.ErrNotObtained, ctx.Err())
		case ctx.Err() != nil:
			return nil, lease.Join(err, ctx.Err())
		case !errors.Is(err, lease.ErrNotObtained):
			return nil, err
		}
		wait, err := o.nextWait(&deadline, attempt, err, left)
		if err != nil {
			return nil, err
		}
		if left > 0 {
			// Try again when the holder's lease runs out, if that comes
			// before the backoff ends.
			wait = min(wait, left+time.Millisecond)
		}
		if notify && w == nil {
			w = c.waitFor(key)
		}
		if err := w.wait(ctx, wait); err != nil {
			return nil, lease.Join(lease.ErrNotObtained, err)
		}
	}
}

// waitDeadline starts the wait of an Obtain (backend.WaitDeadline): ctx's
// deadline, else WithMaxWait or def, a cap.
func (o *options) waitDeadline(ctx context.Context, def time.Duration) backend.WaitDeadline {
	limit := o.maxWait
	if limit == 0 {
		limit = def
	}
	return backend.NewWaitDeadline(ctx, limit)
}

// nextWait is how long to wait after the attempt-th attempt failed with
// held, seeing the holder's lease end in seen (0: unknown), or the error
// that ends the call (backend.WaitDeadline.Next).
func (o *options) nextWait(d *backend.WaitDeadline, attempt int, held error, seen time.Duration) (time.Duration, error) {
	if seen <= 0 {
		seen = -1 // unknown
	}
	backoff, ok := o.retry.Backoff(attempt)
	return d.Next(backoff, ok, held, seen)
}

// obtainOnce makes one attempt: a valid grant; or ErrNotObtained and the
// holder's remaining lease (0: unknown); or another error. mark asks the
// holder's release to notify.
func (c *Client) obtainOnce(ctx context.Context, key string, ttl time.Duration, o *options, mark bool) (*Lock, time.Duration, error) {
	token := rand.Text()
	start := c.clock.Now()
	pc, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("redislock: obtain %q: %w", key, err)
	}
	pid := pc.Conn().PgConn().PID()
	var fence, leftUS int64
	err = pc.QueryRow(ctx, c.sql.acquire, key, token, o.holder, ttl.Milliseconds(), mark).Scan(&fence, &leftUS)
	pc.Release()
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, 0, lease.ErrNotObtained
	case ctx.Err() == nil && c.n.waitedForRow(err):
		// Another transaction holds the row (or the table) locked, past
		// the session's lock or statement timeout: contention.
		return nil, 0, fmt.Errorf("%w: row locked by another transaction: %w", lease.ErrNotObtained, err)
	case err != nil:
		if unknownOutcome(err) {
			// The statement may still run to COMMIT (cut off by ctx or a
			// broken connection, the server does not know): release
			// whatever it grants, once it has ended.
			c.background(func() { c.settle(key, token, pid, ttl, o.releaseTimeout) })
		}
		return nil, 0, fmt.Errorf("redislock: obtain %q: %w", key, err)
	case fence == 0:
		return nil, time.Duration(leftUS) * time.Microsecond, lease.ErrNotObtained
	}
	l := &Lock{c: c, key: key, token: token, fence: fence, opts: *o}
	if err := l.confirm(start, ttl); err != nil {
		_, _ = c.releaseToken(key, token, o.releaseTimeout)
		return nil, 0, err
	}
	return l, 0, nil
}

// unknownOutcome reports whether a failed statement may have run to
// COMMIT: not when the server answered with an error (the statement was
// rolled back) or when nothing was sent.
func unknownOutcome(err error) bool {
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) && !pgconn.SafeToRetry(err)
}

// settle releases the grant to token that an acquire statement cut off on
// the client may still make. A release statement that ran before that
// statement's end would not see its grant (its snapshot is older), so
// settle first waits, up to ttl plus the release timeout or until Close,
// for the server backend that ran it (pid) to end: pgx closed the
// connection, so the backend exits once its statement is done. Behind a
// pooler the pid is not the server's; then the wait ends at once and the
// release is best effort: a late grant lapses after its TTL.
func (c *Client) settle(key, token string, pid uint32, ttl, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(c.ctx, ttl+timeout)
	defer cancel()
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		var alive bool
		err := c.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)`, int32(pid)).Scan(&alive)
		if err != nil || !alive || sleep(ctx, wait) != nil {
			break
		}
	}
	_, _ = c.releaseToken(key, token, timeout)
}

// releaseToken releases key's grant to token if there is one, on a context
// of its own bounded by timeout.
func (c *Client) releaseToken(key, token string, timeout time.Duration) (released bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var n, notified int64
	err = c.pool.QueryRow(ctx, c.sql.release, key, token, c.n.channel).Scan(&n, &notified)
	return n == 1, err
}

// Lock is one grant of a lock: a row of the lease table. Its methods are
// safe for concurrent use, and a nil *Lock answers ErrNotHeld.
type Lock struct {
	c     *Client
	key   string
	token string
	fence int64
	opts  options

	mu       sync.Mutex
	ttl      time.Duration // last TTL asked for
	until    time.Time     // validity confirmed by the last grant or refresh
	released bool          // a Release succeeded: a second one is ErrNotHeld

	watch backend.ReleaseWatch // a Release ends Hold's and Run's renewal at once
}

var (
	_ lease.Lock   = (*Lock)(nil)
	_ lease.Keeper = (*Lock)(nil)
)

// confirm records the validity of a lease of ttl asked for at start, or
// returns ErrGrantExpired when that validity has already passed.
func (l *Lock) confirm(start time.Time, ttl time.Duration) error {
	until := l.opts.validUntil(start, ttl)
	if now := l.c.clock.Now(); !now.Before(until) {
		return backend.Expired(start, now, ttl, l.opts.driftFactor)
	}
	l.mu.Lock()
	l.until, l.ttl = until, ttl
	l.mu.Unlock()
	return nil
}

func (l *Lock) lost() {
	l.mu.Lock()
	l.until = time.Time{}
	l.mu.Unlock()
}

// Key returns the key the caller asked for: the lease row's name.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Token returns the grant's random ownership token (128 bits from
// crypto/rand, base32): unique per grant, never reused. Refresh, Release
// and Verify act only on the row that still carries it.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Fence returns the grant's fencing token, drawn from the table's BIGINT
// sequence (CACHE 1, NO CYCLE): greater than the fence of every earlier
// grant of this key, by any client, and durable with the database. Write
// it with every change to the protected data and refuse lower ones
// ("UPDATE ... SET ..., fence = $1 WHERE id = $2 AND fence <= $1"). Zero
// for a nil Lock.
func (l *Lock) Fence() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// ValidUntil returns the end of the validity last confirmed by the
// database: the start of the Obtain or Refresh statement that confirmed it,
// plus its TTL, less drift (TTL * drift factor + 2 ms), on the monotonic
// clock. The zero Time once the lock is known not to be held.
func (l *Lock) ValidUntil() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// TTL returns the lease's remaining time on the database's clock, or
// ErrNotHeld when this grant no longer holds it. ValidUntil is the
// conservative local view.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, lease.ErrNotHeld
	}
	var us int64
	err := l.c.pool.QueryRow(ctx, l.c.sql.ttl, l.key, l.token).Scan(&us)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		l.lost()
		return 0, lease.ErrNotHeld
	case err != nil:
		return 0, fmt.Errorf("redislock: ttl %q: %w", l.key, err)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// Refresh extends the lease to ttl from now (the database's now), only if
// this grant still holds it, and moves ValidUntil forward. ErrNotHeld when
// the grant is gone: a stale holder can never extend or shorten a newer
// holder's lease, nor revive its own expired one. A ttl that leaves no
// validity is an error matching ErrInvalidArgument. If the database cannot
// be reached, ValidUntil stays as it was and a later Refresh may succeed.
// The same holds when the session's lock or statement timeout ended the
// wait for the row, which another transaction holds locked: the error
// then matches ErrRowLocked.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return lease.ErrNotHeld
	}
	if err := l.opts.checkTTL(ttl); err != nil {
		return err
	}
	start := l.c.clock.Now()
	tag, err := l.c.pool.Exec(ctx, l.c.sql.refresh, l.key, l.token, ttl.Milliseconds())
	if err != nil {
		return l.c.opErr(ctx, "refresh", l.key, err)
	}
	if tag.RowsAffected() == 0 {
		l.lost()
		return lease.ErrNotHeld
	}
	return l.confirm(start, ttl)
}

// Release gives the lock back, only if this grant still holds it;
// ErrNotHeld otherwise (a stale holder never releases a newer holder's
// lease). The row is kept, released (see the package doc, Fences); when a
// waiter marked it wanted, the same statement notifies the table's channel.
// Release runs on a context detached from ctx's cancellation and deadline,
// bounded by the release timeout (default 3 s), so `defer l.Release(ctx)`
// cleans up after ctx was cancelled. If a lock or statement timeout ended
// the wait for the row, which another transaction holds locked, the error
// matches ErrRowLocked and the lease stays held until a later Release gets
// through or its TTL runs out.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return lease.ErrNotHeld
	}
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return lease.ErrNotHeld
	}
	l.watch.Released() // Run's fn, a Held: the lock is given up
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.releaseTimeout)
	defer cancel()
	var n, notified int64
	err := l.c.pool.QueryRow(rctx, l.c.sql.release, l.key, l.token, l.c.n.channel).Scan(&n, &notified)
	l.mu.Lock()
	l.until, l.released = time.Time{}, err == nil && n == 1
	l.mu.Unlock()
	switch {
	case err != nil:
		return l.c.opErr(rctx, "release", l.key, err)
	case n == 0:
		return lease.ErrNotHeld
	}
	return nil
}

// Keep renews the lock to ttl every interval on its Client's clock until
// stop is called, for lease.Hold and Run, which find it as a lease.Keeper:
// lost is called, at most once, when a renewal finds the lock gone or the
// validity ends before a renewal got through, or at once, with
// ErrReleased, when the Lock's Release is called (on a nil *Lock: at once,
// with ErrNotHeld).
func (l *Lock) Keep(ttl, interval time.Duration, lost func(cause error)) (stop func()) {
	if l == nil {
		lost(lease.ErrNotHeld)
		return func() {}
	}
	return l.watch.Keep(lost, func(lost func(cause error)) func() {
		return lease.Refresher{Clock: l.c.clock, Lock: l}.Keep(ttl, interval, lost)
	})
}

// Now is the time on the Client's clock, that of ValidUntil: the real time
// but in tests. On a nil *Lock it is the real time.
func (l *Lock) Now() time.Time {
	if l == nil {
		return time.Now()
	}
	return l.c.clock.Now()
}

// Run obtains the lock on key, runs fn while renewing the lease in the
// background, and releases the lock when fn returns; see lease.RunLock. If
// a renewal finds the lease gone, or renewals cannot get through before
// ValidUntil, fn's ctx is cancelled no later than the last confirmed
// ValidUntil and Run returns an error matching ErrLockLost (and fn's own
// error, if it failed). A Release of l inside fn ends fn's ctx at once and
// Run returns ErrReleased (see lease.RunLock). A panic in fn releases the
// lock before it goes on up. Obtain's errors are returned as Obtain returns
// them, and fn is not called.
func (c *Client) Run(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context, l *Lock) error, opts ...Option) error {
	if fn == nil {
		return lease.Invalid("nil fn")
	}
	interval, err := c.renewInterval(ttl, opts)
	if err != nil {
		return err
	}
	l, err := c.Obtain(ctx, key, ttl, opts...)
	if err != nil {
		return err
	}
	return lease.RunLock(ctx, l, ttl, func(ctx context.Context) error { return fn(ctx, l) }, lease.WithRefreshInterval(interval))
}

// renewInterval checks Run's TTL and options and returns the renewal
// period.
func (c *Client) renewInterval(ttl time.Duration, opts []Option) (time.Duration, error) {
	o, err := c.callOptions(opts)
	if err != nil {
		return 0, err
	}
	if err := o.checkTTL(ttl); err != nil {
		return 0, err
	}
	return lease.RenewInterval(ttl, o.refreshInterval, o.driftFactor)
}
