package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redislock-go/redislock/lease"
)

// Verify checks, inside tx, that this grant still holds the lease, and
// locks the lease row (SELECT ... FOR SHARE) until tx ends: from then on no
// other client can take the lock over, even after the lease expires, until
// tx commits or rolls back. Call it as the last statement before COMMIT,
// so that tx's writes commit only while the lock is held: a Refresh of this
// Lock on another connection waits for tx as well. ErrNotHeld when the
// grant no longer holds the lease, ErrRowLocked when a lock or statement
// timeout ended the wait for a row another transaction holds locked (in
// both cases tx should roll back).
func (l *Lock) Verify(ctx context.Context, tx pgx.Tx) error {
	if l == nil {
		return lease.ErrNotHeld
	}
	if tx == nil {
		return lease.Invalid("nil transaction")
	}
	var fence int64
	err := tx.QueryRow(ctx, l.c.sql.verify, l.key, l.token).Scan(&fence)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		l.lost()
		return lease.ErrNotHeld
	case err != nil:
		return l.c.opErr(ctx, "verify", l.key, err)
	}
	return nil
}

// RunTx is Run for work that lives in the same database: it obtains the
// lock on key, begins a transaction on the pool and runs fn in it while the
// lease is renewed in the background; then it verifies in the same
// transaction that the lease is still held (Verify, which also keeps the
// lease row from being taken over) and commits. fn's writes therefore
// commit only under the lock, and atomically with nothing else: fn should
// write l.Fence() with them and refuse lower fences ("UPDATE ... SET ...,
// fence = $1 WHERE id = $2 AND fence <= $1"), so that even a transaction
// of an earlier holder that commits late cannot undo a newer one's work.
//
// If fn returns an error, or the lock is lost (fn's ctx is cancelled; the
// result matches ErrLockLost), the transaction rolls back. If the
// connection drops mid-transaction (pg_terminate_backend, a network
// failure), PostgreSQL rolls the transaction back: neither its writes nor
// a lock are left behind, and the lease is released as usual. A COMMIT
// that fails is returned as such; once Verify has passed, the COMMIT runs
// on a context detached from ctx (bounded by the release timeout), since
// no takeover can come before it. The lease is released after the
// transaction ends.
//
// The transaction runs at the pool's default isolation level; fn may
// change it with SET TRANSACTION as its first statement. It works behind a
// transaction pooler.
func (c *Client) RunTx(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context, tx pgx.Tx, l *Lock) error, opts ...Option) error {
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
	committed := false
	err = lease.RunLock(ctx, l, ttl, func(ctx context.Context) error {
		tx, err := c.pool.Begin(ctx)
		if err != nil {
			return fmt.Errorf("redislock: begin under %q: %w", key, err)
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.releaseTimeout)
			defer cancel()
			_ = tx.Rollback(rctx) // after Commit: a no-op
		}()
		if err := fn(ctx, tx, l); err != nil {
			return err
		}
		if err := l.Verify(ctx, tx); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.releaseTimeout)
		defer cancel()
		if err := tx.Commit(cctx); err != nil {
			return fmt.Errorf("redislock: commit under %q: %w", key, err)
		}
		committed = true
		return nil
	}, lease.WithRefreshInterval(interval))
	if committed && errors.Is(err, lease.ErrLockLost) {
		// The lease ran out after Verify locked the row: the commit
		// came first, under the lock.
		return nil
	}
	return err
}
