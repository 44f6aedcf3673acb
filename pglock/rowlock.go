package pglock

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrRowLocked means that Refresh, Release, Verify or a Store write gave up
// waiting for its row, which another transaction holds locked: the
// server's lock_timeout or statement_timeout ended the wait (see the
// package doc, Server settings). The statement changed nothing: a Refresh
// did not extend the lease (ValidUntil stays; the renewal of Run and RunTx
// tries again at its next interval), a Release did not release it (the
// lease stays held until a later Release gets through or its TTL runs
// out), a Verify did not lock the row (roll the transaction back). Try
// again once the other transaction has ended; a row that stays locked
// points at a long transaction holding it (pg_locks, pg_blocking_pids).
// The error wraps the server's *pgconn.PgError (SQLSTATE 55P03 or 57014).
// Obtain reports the same wait as contention: ErrNotObtained.
var ErrRowLocked = errors.New("redislock: row locked by another transaction")

// tupleAt is the position of a row as PostgreSQL's lock wait context
// gives it: "while updating tuple (0,1) in relation ...".
var tupleAt = regexp.MustCompile(`\(\d+,\d+\)`)

// waitedForRow reports whether err says that a statement on the Client's
// tables gave up waiting for a lock another transaction holds:
//   - a lock timeout (55P03), which only a lock wait raises: for the
//     lease statements, a wait for a row (also one queued behind another
//     waiter for it) or for the whole table (LOCK TABLE, DDL);
//   - a statement timeout (57014) whose context names a row of the
//     Client's tables: the server ended the statement while it waited for
//     that row's transaction ("while locking tuple (0,1) in relation
//     "leases""). A statement timeout without it (a slow server, a table
//     lock, a wait queued behind another waiter for the row, which has
//     no context) is not one.
func (n names) waitedForRow(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "55P03": // lock_not_available
		return true
	case "57014": // query_canceled
		return strings.Contains(pgErr.Where, n.base) && tupleAt.MatchString(pgErr.Where)
	}
	return false
}

// opErr is the error of statement op on key: one matching ErrRowLocked
// when the statement gave up waiting for the row (and ctx, the caller's,
// had not ended), else the statement's error as it is.
func (c *Client) opErr(ctx context.Context, op, key string, err error) error {
	if ctx.Err() == nil && c.n.waitedForRow(err) {
		return fmt.Errorf("%w: %s %q: %w", ErrRowLocked, op, key, err)
	}
	return fmt.Errorf("redislock: %s %q: %w", op, key, err)
}
