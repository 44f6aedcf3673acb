package pglock_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/pglock"
)

// The server settings that end a statement waiting for a lock, as a role,
// a database or a pool may set them, and the SQLSTATE each ends it with.
// The values are far above what a statement that does not wait takes (a
// statement timeout counts the server's time only), so only the waits for
// another transaction's lock reach them.
var timeoutSettings = []struct{ name, value, code string }{
	{"lock_timeout", "100ms", "55P03"},
	{"statement_timeout", "500ms", "57014"},
}

// timeoutClient returns a Client on table, and its pool, whose sessions
// carry setting = value (as a role's ALTER ROLE ... SET would give them).
func timeoutClient(t *testing.T, table, setting, value string) (*pglock.Client, *pgxpool.Pool) {
	t.Helper()
	p := newPool(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.RuntimeParams[setting] = value })
	var got string
	require.NoError(t, p.QueryRow(context.Background(), "SELECT current_setting($1)", setting).Scan(&got))
	require.NotEqual(t, "0", got, "%s is not set on the pool's sessions", setting)
	return newClient(t, p, table), p
}

// holdRow locks row key of table (SELECT ... FOR UPDATE) in an open
// transaction of admin, as a long transaction of another client would,
// and returns the function that ends it (rolls back; also at the end of
// t).
func holdRow(t *testing.T, admin *pgxpool.Pool, table, key string) (end func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := admin.Begin(ctx)
	require.NoError(t, err)
	var once sync.Once
	end = func() { once.Do(func() { require.NoError(t, tx.Rollback(ctx)) }) }
	t.Cleanup(end)
	var name string
	require.NoError(t, tx.QueryRow(ctx, `SELECT name FROM `+table+` WHERE name = $1 FOR UPDATE`, key).Scan(&name))
	return end
}

// requireRowLocked checks that err is the matchable error of an operation
// that gave up waiting for a row another transaction locked: ErrRowLocked,
// wrapping the server's error with code, and nothing else.
func requireRowLocked(t *testing.T, err error, code string) {
	t.Helper()
	require.ErrorIs(t, err, pglock.ErrRowLocked)
	assert.NotErrorIs(t, err, pglock.ErrNotHeld)
	assert.NotErrorIs(t, err, pglock.ErrNotObtained)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, code, pgErr.Code)
}

// Under lock_timeout or statement_timeout, while another transaction holds
// a held lease's row locked, Refresh and Release give up with ErrRowLocked
// (wrapping the server's error) and change nothing: the lease stays held
// with its ValidUntil, and once that transaction ends they succeed.
func TestRowLockedRefreshRelease(t *testing.T) {
	for _, s := range timeoutSettings {
		t.Run(s.name, func(t *testing.T) {
			table := newTable(t)
			admin := newPool(t)
			newClient(t, admin, table) // creates the tables
			c, _ := timeoutClient(t, table, s.name, s.value)
			ctx := ctxFor(t)

			l, err := c.Obtain(ctx, "refresh", 30*time.Second)
			require.NoError(t, err)
			until := l.ValidUntil()
			end := holdRow(t, admin, table, "refresh")
			requireRowLocked(t, l.Refresh(ctx, 30*time.Second), s.code)
			assert.Equal(t, until, l.ValidUntil(), "a refresh that did not happen moved ValidUntil")
			end()
			require.NoError(t, l.Refresh(ctx, 30*time.Second))
			require.NoError(t, l.Release(ctx))

			l, err = c.Obtain(ctx, "release", 30*time.Second)
			require.NoError(t, err)
			end = holdRow(t, admin, table, "release")
			requireRowLocked(t, l.Release(ctx), s.code)
			row, ok := readRow(t, admin, table, "release")
			require.True(t, ok)
			assert.True(t, row.Live && row.Token == l.Token(), "a release that did not happen changed the row: %+v", row)
			end()
			require.NoError(t, l.Release(ctx), "a Release after the transaction ended")
			assert.ErrorIs(t, l.Release(ctx), pglock.ErrNotHeld)
		})
	}
}

// Under lock_timeout or statement_timeout, an Obtain that finds the key's
// row locked by another transaction counts it as contention: without
// retry it returns ErrNotObtained, whether the lease is held or free; with
// a retry strategy it waits (the wanted mark does not wait for the row)
// and obtains once the row is free.
func TestRowLockedObtain(t *testing.T) {
	for _, s := range timeoutSettings {
		t.Run(s.name, func(t *testing.T) {
			table := newTable(t)
			admin := newPool(t)
			plain := newClient(t, admin, table)
			c, _ := timeoutClient(t, table, s.name, s.value)
			waited := make(chan struct{}, 1)
			pglock.SetTestHooks(c, func(bool) {
				select {
				case waited <- struct{}{}:
				default:
				}
			}, nil)
			ctx := ctxFor(t)
			retry := pglock.WithRetry(pglock.LimitRetry(pglock.LinearBackoff(10*time.Millisecond), 3))

			// Held by another, its row locked by a third transaction.
			holder, err := plain.Obtain(ctx, "held", 30*time.Second)
			require.NoError(t, err)
			end := holdRow(t, admin, table, "held")
			for _, opts := range [][]pglock.Option{nil, {retry}} {
				_, err = c.Obtain(ctx, "held", 10*time.Second, opts...)
				require.ErrorIs(t, err, pglock.ErrNotObtained, "retry %v", opts != nil)
				assert.NotErrorIs(t, err, context.DeadlineExceeded)
			}
			end()
			require.NoError(t, holder.Release(ctx))

			// Free (released), its row locked by another transaction: the
			// acquire statement itself waits for the row.
			l, err := plain.Obtain(ctx, "free", 30*time.Second)
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx))
			end = holdRow(t, admin, table, "free")
			_, err = c.Obtain(ctx, "free", 10*time.Second)
			require.ErrorIs(t, err, pglock.ErrNotObtained)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, "the server's error is kept")
			assert.Equal(t, s.code, pgErr.Code)

			// With retry it waits until the row is free, then obtains.
			select {
			case <-waited: // a wait of the attempts above
			default:
			}
			got := make(chan error, 1)
			go func() {
				l, err := c.Obtain(ctx, "free", 10*time.Second, pglock.WithRetry(pglock.LinearBackoff(20*time.Millisecond)))
				if err == nil {
					err = l.Release(ctx)
				}
				got <- err
			}()
			select {
			case <-waited: // an attempt gave up on the locked row; Obtain waits
			case err := <-got:
				t.Fatalf("Obtain with retry returned before the row was free: %v", err)
			}
			end()
			require.NoError(t, <-got)
		})
	}
}

// A waiter's wanted mark never waits for the row's lock: with no timeout
// set at all, an Obtain with retry on a held lease whose row another
// transaction locked makes its attempts and returns ErrNotObtained while
// that transaction is still open.
func TestWantedMarkDoesNotWaitForRow(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	c := newClient(t, admin, table)
	ctx := ctxFor(t)
	_, err := c.Obtain(ctx, "k", 30*time.Second)
	require.NoError(t, err)
	holdRow(t, admin, table, "k")
	// The bound only ends the test when a waiter does wait for the row.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = c.Obtain(wctx, "k", 10*time.Second, pglock.WithRetry(pglock.LimitRetry(pglock.LinearBackoff(10*time.Millisecond), 3)))
	require.ErrorIs(t, err, pglock.ErrNotObtained)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "a waiter waited for the row's lock")
}

// Verify (RunTx's last statement) and the Store's writes give up on a row
// locked by another transaction with ErrRowLocked as well.
func TestRowLockedVerifyAndStore(t *testing.T) {
	for _, s := range timeoutSettings {
		t.Run(s.name, func(t *testing.T) {
			table := newTable(t)
			admin := newPool(t)
			newClient(t, admin, table)
			c, pool := timeoutClient(t, table, s.name, s.value)
			ctx := ctxFor(t)

			l, err := c.Obtain(ctx, "verify", 30*time.Second)
			require.NoError(t, err)
			end := holdRow(t, admin, table, "verify")
			err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return l.Verify(ctx, tx) })
			requireRowLocked(t, err, s.code)
			end()
			require.NoError(t, l.Release(ctx))

			st := c.Store()
			require.NoError(t, st.Put(ctx, "record", []byte("a"), 1, 0))
			end = holdRow(t, admin, table+"_records", "record")
			requireRowLocked(t, st.Put(ctx, "record", []byte("b"), 2, 0), s.code)
			requireRowLocked(t, st.Delete(ctx, "record", 2), s.code)
			end()
			require.NoError(t, st.Put(ctx, "record", []byte("b"), 2, 0))
		})
	}
}

// A statement timeout that does not come from a row lock (here: the whole
// table locked, as DDL would) is not contention: the caller sees the
// server's error, neither ErrRowLocked nor ErrNotObtained.
func TestStatementTimeoutWithoutRowLock(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	newClient(t, admin, table)
	c, _ := timeoutClient(t, table, "statement_timeout", "500ms")
	ctx := ctxFor(t)
	l, err := c.Obtain(ctx, "k", 30*time.Second)
	require.NoError(t, err)

	tx, err := admin.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx, `LOCK TABLE `+table+` IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	for what, err := range map[string]error{
		"Refresh": l.Refresh(ctx, 30*time.Second),
		"Obtain":  func() error { _, err := c.Obtain(ctx, "other", 10*time.Second); return err }(),
	} {
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, what)
		assert.Equal(t, "57014", pgErr.Code, what)
		assert.NotErrorIs(t, err, pglock.ErrRowLocked, what)
		assert.NotErrorIs(t, err, pglock.ErrNotObtained, what)
	}
	require.NoError(t, tx.Rollback(ctx))
	require.NoError(t, l.Release(ctx))
}

// New on a schema that is current takes no migration lock: under
// lock_timeout it succeeds while another New's migration holds it.
func TestNewDoesNotWaitForMigrationLock(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	newClient(t, admin, table)
	ctx := ctxFor(t)
	tx, err := admin.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(pglock.MigrateLockID))
	require.NoError(t, err)
	timeoutClient(t, table, "lock_timeout", "100ms")
}

// The settings on a role, the way to set them behind a transaction pooler
// (PgBouncer refuses them as startup parameters): through PgBouncer in
// transaction mode, the role's lock_timeout ends Refresh and Release with
// ErrRowLocked while another transaction holds the row, and an Obtain with
// retry returns ErrNotObtained.
func TestRowLockedRoleSettingBehindPooler(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	newClient(t, admin, table)
	ctx := ctxFor(t)
	schema := strings.Split(table, ".")[0]
	role := schema + "_app"
	for _, sql := range []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		`ALTER ROLE ` + role + ` SET lock_timeout = '100ms'`,
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
		`GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA ` + schema + ` TO ` + role,
	} {
		_, err := admin.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	t.Cleanup(func() {
		for _, sql := range []string{`DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			_, err := admin.Exec(context.Background(), sql)
			assert.NoError(t, err, sql)
		}
	})
	through := startPgBouncer(t, role)
	u, err := url.Parse(through)
	require.NoError(t, err)
	u.User = url.User(role)
	pool := bouncerPool(t, u.String())
	c := newClient(t, pool, table, pglock.WithTransactionPooler(true))
	var got string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&got))
	require.Equal(t, "100ms", got)

	l, err := c.Obtain(ctx, "k", 30*time.Second)
	require.NoError(t, err)
	end := holdRow(t, admin, table, "k")
	requireRowLocked(t, l.Refresh(ctx, 30*time.Second), "55P03")
	requireRowLocked(t, l.Release(ctx), "55P03")
	_, err = c.Obtain(ctx, "k", 10*time.Second, pglock.WithRetry(pglock.LimitRetry(pglock.LinearBackoff(10*time.Millisecond), 3)))
	require.ErrorIs(t, err, pglock.ErrNotObtained)
	end()
	require.NoError(t, l.Release(ctx))
}
