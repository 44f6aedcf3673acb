package pglock

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redislock-go/redislock/lease"
)

// ErrSessionRequired means a session advisory lock was asked for where the
// connection is not a session of its own: the pool goes through a pooler
// (declared with WithTransactionPooler, or found because the server's
// backend pid differs from the one the connection was opened with). Use
// WithSessionConfig to open such locks on a direct connection, or use the
// lease-table locks or RunAdvisoryTx, which work behind any pooler.
var ErrSessionRequired = errors.New("redislock: session advisory locks need a session connection")

// AdvisoryID returns the 64-bit key of PostgreSQL's advisory lock functions
// that key maps to: the first 8 bytes of SHA-256("redislock:" + key), big
// endian. In pg_locks it shows as classid (high 32 bits) and objid (low 32
// bits) with objsubid 1. Different keys may map to the same id (a chance
// of about n²/2⁶⁵ among n keys); they then exclude each other, which is
// safe but contended.
func AdvisoryID(key string) int64 {
	sum := sha256.Sum256([]byte("redislock:" + key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// canonical returns the distinct ids of keys in ascending order, the order
// in which every client takes them, so that no two multi-lock holders wait
// for each other.
func canonical(keys []string) ([]int64, error) {
	if len(keys) == 0 {
		return nil, lease.Invalid("no keys")
	}
	ids := make([]int64, 0, len(keys))
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, err
		}
		ids = append(ids, AdvisoryID(k))
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// Advisory lock statements. $1: the ids in canonical order; $2: the
// backend pid the connection was opened with, 0 to skip the check.
const (
	// One row: the ids locked (in order), or NULL when the statement ran
	// in another backend than the connection was opened with (a pooler
	// in between; then nothing was locked). pg_try_advisory_lock never
	// waits.
	sqlAdvisoryLock = `SELECT CASE WHEN $2::integer = 0 OR pg_backend_pid() = $2::integer THEN
	coalesce((SELECT array_agg(id ORDER BY i) FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, i) WHERE pg_try_advisory_lock(id)), '{}')
END`
	// One row: how many of $1 were unlocked (each must have been held).
	sqlAdvisoryUnlock = `SELECT count(*) FILTER (WHERE pg_advisory_unlock(id)) FROM unnest($1::bigint[]) AS u(id)`
	// One row: true when every id of $1 was locked for the transaction.
	sqlAdvisoryXactLock = `SELECT bool_and(pg_try_advisory_xact_lock(id)) FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, i)`
)

// AdvisoryLock is a set of session advisory locks (pg_advisory_lock) held
// on a connection of its own. Unlike a lease it has no TTL, no renewal and
// no fence: it is held exactly as long as that connection's session, and
// the server releases it when the session ends. A watcher notices the
// connection's loss (at once when the server closes it, within the check
// interval when it silently breaks) and cancels Context with a cause
// matching ErrLockLost. Its methods are safe for concurrent use.
type AdvisoryLock struct {
	c    *Client
	keys []string
	ids  []int64
	conn *pgx.Conn
	put  func(broken bool) // gives the connection back (or closes it)
	opts options

	ctx    context.Context
	cancel context.CancelCauseFunc
	stopW  context.CancelFunc
	doneW  chan struct{}

	once   sync.Once
	relErr error
}

// noTTLWait bounds the waits of advisory locks, which have no TTL, when
// neither ctx nor WithMaxWait does.
const noTTLWait = 24 * time.Hour

var errAdvisoryReleased = fmt.Errorf("%w: released", lease.ErrNotHeld)

// ObtainAdvisory takes the session advisory locks of keys, all or none, in
// canonical order (ascending AdvisoryID), on a connection taken out of the
// pool for as long as they are held (or opened with WithSessionConfig).
// While one of them is held by another session it gives back what it took
// and retries per WithRetry (polling; default: one attempt), then returns
// ErrNotObtained. Behind a transaction pooler it refuses with
// ErrSessionRequired (see WithTransactionPooler). ctx gives Context its
// values and its cancellation; its end does not release the locks: call
// Release. Each held AdvisoryLock keeps a pool connection busy.
func (c *Client) ObtainAdvisory(ctx context.Context, keys []string, opts ...Option) (*AdvisoryLock, error) {
	o, err := c.callOptions(opts)
	if err != nil {
		return nil, err
	}
	ids, err := canonical(keys)
	if err != nil {
		return nil, err
	}
	if c.opts.txPooler && c.opts.sessionConf == nil {
		return nil, fmt.Errorf("%w: the pool is declared to go through a transaction pooler (WithTransactionPooler) and no WithSessionConfig is set", ErrSessionRequired)
	}
	conn, put, err := c.advisoryConn(ctx)
	if err != nil {
		return nil, fmt.Errorf("redislock: advisory connection: %w", err)
	}
	pid := int32(conn.PgConn().PID())
	if c.opts.sessionConf != nil {
		pid = 0 // trusted: a direct connection or a session pooler
	}
	// No TTL bounds the wait: only ctx and WithMaxWait do.
	deadline := o.waitDeadline(ctx, noTTLWait)
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			if err := deadline.Expired(); err != nil {
				put(false)
				return nil, err // no attempt starts after the wait limit
			}
		}
		var got []int64
		err := conn.QueryRow(ctx, sqlAdvisoryLock, ids, pid).Scan(&got)
		switch {
		case err != nil:
			put(true) // closing the session drops whatever it holds
			if ctx.Err() != nil {
				return nil, lease.Join(lease.ErrNotObtained, ctx.Err())
			}
			return nil, fmt.Errorf("redislock: advisory lock: %w", err)
		case got == nil:
			put(true)
			return nil, fmt.Errorf("%w: the statement ran in another server session than the connection was opened with (a pooler is in between); use WithSessionConfig", ErrSessionRequired)
		case len(got) == len(ids):
			return c.held(ctx, keys, ids, conn, put, o), nil
		}
		if len(got) > 0 {
			if err := unlock(conn, got, o.releaseTimeout); err != nil {
				put(true)
				return nil, err
			}
		}
		wait, err := o.nextWait(&deadline, attempt, lease.ErrNotObtained, 0)
		if err != nil {
			put(false)
			return nil, err
		}
		if err := sleep(ctx, wait); err != nil {
			put(false)
			return nil, lease.Join(lease.ErrNotObtained, err)
		}
	}
}

// advisoryConn returns a connection for session locks and how to give it
// back: to the pool, or closed when broken or when it is not the pool's.
func (c *Client) advisoryConn(ctx context.Context) (*pgx.Conn, func(broken bool), error) {
	closeConn := func(conn *pgx.Conn) {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}
	if c.opts.sessionConf != nil {
		conn, err := c.sessionConn(ctx)
		if err != nil {
			return nil, nil, err
		}
		return conn, func(bool) { closeConn(conn) }, nil
	}
	pc, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	return pc.Conn(), func(broken bool) {
		if broken {
			closeConn(pc.Hijack())
			return
		}
		pc.Release()
	}, nil
}

func unlock(conn *pgx.Conn, ids []int64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var n int
	if err := conn.QueryRow(ctx, sqlAdvisoryUnlock, ids).Scan(&n); err != nil {
		return fmt.Errorf("redislock: advisory unlock: %w", err)
	}
	if n != len(ids) {
		return fmt.Errorf("redislock: advisory unlock: %d of %d locks were held", n, len(ids))
	}
	return nil
}

func (c *Client) held(ctx context.Context, keys []string, ids []int64, conn *pgx.Conn, put func(bool), o options) *AdvisoryLock {
	a := &AdvisoryLock{c: c, keys: slices.Clone(keys), ids: ids, conn: conn, put: put, opts: o, doneW: make(chan struct{})}
	a.ctx, a.cancel = context.WithCancelCause(ctx)
	var wctx context.Context
	wctx, a.stopW = context.WithCancel(context.Background())
	go a.watch(wctx)
	return a
}

// watch waits on the idle connection until it fails or stop: a server
// that closes it (pg_terminate_backend, a restart) is noticed at once; a
// connection that breaks silently by the ping every DefaultAdvisoryCheck.
func (a *AdvisoryLock) watch(ctx context.Context) {
	defer close(a.doneW)
	pg := a.conn.PgConn()
	for {
		wctx, cancel := context.WithTimeout(ctx, DefaultAdvisoryCheck)
		err := pg.WaitForNotification(wctx) // interrupted by a deadline: the connection stays usable
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			continue // nothing LISTENs here; ignore
		case !errors.Is(err, context.DeadlineExceeded) || pg.IsClosed():
			a.cancel(fmt.Errorf("%w: the advisory lock's connection failed: %w", lease.ErrLockLost, err))
			return
		}
		// Idle for a check interval: ping, on a context of its own (a ping
		// cut short would close the connection).
		pctx, cancel := context.WithTimeout(context.Background(), DefaultAdvisoryCheck)
		err = pg.Ping(pctx)
		cancel()
		if err != nil {
			a.cancel(fmt.Errorf("%w: the advisory lock's connection failed its check: %w", lease.ErrLockLost, err))
			return
		}
	}
}

// Keys returns the keys as given.
func (a *AdvisoryLock) Keys() []string { return slices.Clone(a.keys) }

// Context returns a context that is cancelled when the locks are lost (the
// connection failed; the cause matches ErrLockLost), when they are
// released, or when ObtainAdvisory's ctx ends.
func (a *AdvisoryLock) Context() context.Context { return a.ctx }

// Done is closed when Context is done.
func (a *AdvisoryLock) Done() <-chan struct{} { return a.ctx.Done() }

// Err returns nil while the locks are held; after that, why not: an error
// matching ErrLockLost once lost, ErrNotHeld once released, or the error of
// ObtainAdvisory's ctx if that ended first.
func (a *AdvisoryLock) Err() error {
	if a.ctx.Err() == nil {
		return nil
	}
	return context.Cause(a.ctx)
}

// Release unlocks the locks and gives the connection back; if the
// connection was lost, it returns an error matching ErrNotHeld (the server
// released the locks with the session). It runs on a context of its own,
// bounded by the release timeout; if the unlock fails the connection is
// closed, which releases the locks too. Later calls return the first
// call's result.
func (a *AdvisoryLock) Release(context.Context) error {
	a.once.Do(func() {
		a.stopW()
		<-a.doneW
		lost := errors.Is(context.Cause(a.ctx), lease.ErrLockLost)
		a.cancel(errAdvisoryReleased)
		if lost {
			a.put(true)
			a.relErr = lease.Join(lease.ErrNotHeld, context.Cause(a.ctx))
			return
		}
		if err := unlock(a.conn, a.ids, a.opts.releaseTimeout); err != nil {
			a.put(true)
			a.relErr = err
			return
		}
		a.put(false)
	})
	return a.relErr
}

// RunAdvisory takes the session advisory locks of keys (ObtainAdvisory),
// runs fn, and releases them when fn returns (also when it panics). fn's
// ctx is cancelled when the locks' connection is lost; RunAdvisory then
// returns an error matching ErrLockLost (and fn's own error).
func (c *Client) RunAdvisory(ctx context.Context, keys []string, fn func(ctx context.Context) error, opts ...Option) error {
	if fn == nil {
		return lease.Invalid("nil fn")
	}
	a, err := c.ObtainAdvisory(ctx, keys, opts...)
	if err != nil {
		return err
	}
	defer a.Release(ctx)
	fnErr := fn(a.Context())
	if cause := context.Cause(a.Context()); errors.Is(cause, lease.ErrLockLost) {
		return lease.Join(fnErr, cause)
	}
	return fnErr
}

// RunAdvisoryTx runs fn in a transaction that holds the transaction
// advisory locks of keys (pg_try_advisory_xact_lock, in canonical order):
// they are released by COMMIT or ROLLBACK, so nothing can outlive the
// transaction, and they work behind a transaction pooler. While one of them
// is held by another it rolls back and retries per WithRetry (default: one
// attempt), then returns ErrNotObtained. fn's error rolls the transaction
// back; otherwise it commits. There is no fence: use the lease locks
// (RunTx) where a late writer must be refused.
func (c *Client) RunAdvisoryTx(ctx context.Context, keys []string, fn func(ctx context.Context, tx pgx.Tx) error, opts ...Option) error {
	if fn == nil {
		return lease.Invalid("nil fn")
	}
	o, err := c.callOptions(opts)
	if err != nil {
		return err
	}
	ids, err := canonical(keys)
	if err != nil {
		return err
	}
	deadline := o.waitDeadline(ctx, noTTLWait)
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			if err := deadline.Expired(); err != nil {
				return err // no attempt starts after the wait limit
			}
		}
		done, err := c.advisoryTxOnce(ctx, c.pool, ids, fn)
		if done || !errors.Is(err, lease.ErrNotObtained) {
			return err
		}
		wait, err := o.nextWait(&deadline, attempt, err, 0)
		if err != nil {
			return err
		}
		if err := sleep(ctx, wait); err != nil {
			return lease.Join(lease.ErrNotObtained, err)
		}
	}
}

// advisoryTxOnce makes one attempt; done reports that fn ran.
func (c *Client) advisoryTxOnce(ctx context.Context, pool *pgxpool.Pool, ids []int64, fn func(context.Context, pgx.Tx) error) (done bool, err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("redislock: begin: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.call.releaseTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	var all bool
	if err := tx.QueryRow(ctx, sqlAdvisoryXactLock, ids).Scan(&all); err != nil {
		return false, fmt.Errorf("redislock: advisory xact lock: %w", err)
	}
	if !all {
		return false, lease.ErrNotObtained
	}
	if err := fn(ctx, tx); err != nil {
		return true, err
	}
	if err := tx.Commit(ctx); err != nil {
		return true, fmt.Errorf("redislock: commit: %w", err)
	}
	return true, nil
}
