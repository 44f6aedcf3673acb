package pglock_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/pglock"
)

// The tests run against the PostgreSQL at REDISLOCK_POSTGRES_DSN (default
// the local one: 127.0.0.1:5432, database test, user postgres, trust auth).
// Each test makes a schema of its own and drops it at the end. Without a
// PostgreSQL the tests skip, unless REDISLOCK_REQUIRE_POSTGRES=1.

func dsn() string {
	if d := os.Getenv("REDISLOCK_POSTGRES_DSN"); d != "" {
		return d
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

var (
	probeOnce sync.Once
	probeErr  error
)

// needPostgres skips (or, with REDISLOCK_REQUIRE_POSTGRES=1, fails) t when
// no PostgreSQL answers.
func needPostgres(t testing.TB) {
	t.Helper()
	probeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn())
		if err != nil {
			probeErr = err
			return
		}
		probeErr = conn.Ping(ctx)
		_ = conn.Close(ctx)
	})
	if probeErr == nil {
		return
	}
	msg := fmt.Sprintf("no PostgreSQL at %s (set REDISLOCK_POSTGRES_DSN): %v", dsn(), probeErr)
	require.NotEqual(t, "1", os.Getenv("REDISLOCK_REQUIRE_POSTGRES"), fmt.Sprint(msg+" (REDISLOCK_REQUIRE_POSTGRES=1)"))
	t.Skip(msg)
}

// newPool returns a pool on the test database, closed at the end of t.
func newPool(t testing.TB, tweak ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	needPostgres(t)
	cfg, err := pgxpool.ParseConfig(dsn())
	require.NoError(t, err)
	for _, f := range tweak {
		f(cfg)
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// newTable makes a schema of t's own and returns a lease table name in it;
// the schema is dropped at the end of t.
func newTable(t testing.TB) string {
	t.Helper()
	admin := newPool(t)
	schema := "pglock_test_" + strings.ToLower(rand.Text()[:12])
	_, err := admin.Exec(context.Background(), "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		assert.NoError(t, err, "drop schema %s", schema)
	})
	return schema + ".leases"
}

// newClient returns a Client on pool for table, closed at the end of t.
func newClient(t testing.TB, pool *pgxpool.Pool, table string, opts ...pglock.ClientOption) *pglock.Client {
	t.Helper()
	c, err := pglock.New(context.Background(), pool, append([]pglock.ClientOption{pglock.WithTable(table)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// breakOn deletes a lease row behind its holder's back, as an operator's
// DELETE would.
func breakOn(t testing.TB, pool *pgxpool.Pool, table string) func(key string) {
	return func(key string) {
		_, err := pool.Exec(context.Background(), "DELETE FROM "+table+" WHERE name = $1", key)
		assert.NoError(t, err, "break %q", key)
	}
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// appPool returns a pool whose connections carry application_name app, so
// that tests can find their backends in pg_stat_activity.
func appPool(t testing.TB, app string, tweak ...func(*pgxpool.Config)) *pgxpool.Pool {
	return newPool(t, append([]func(*pgxpool.Config){func(cfg *pgxpool.Config) {
		cfg.ConnConfig.RuntimeParams["application_name"] = app
	}}, tweak...)...)
}

// blockedBackend waits until a backend of application app waits for a
// lock, and returns its pid.
func blockedBackend(t testing.TB, admin *pgxpool.Pool, app string) int32 {
	t.Helper()
	var pid int32
	// Polling the server's view: no event announces a backend's wait.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := admin.QueryRow(context.Background(),
			`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&pid)
		assert.NoError(c, err)
	}, 10*time.Second, 5*time.Millisecond, "no backend of %s waits for a lock", app)
	return pid
}

func terminate(t testing.TB, admin *pgxpool.Pool, pid int32) {
	t.Helper()
	var ok bool
	if err := admin.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d): %v %v", pid, ok, err)
	}
}

// leaseRow is a lease row as the table holds it.
type leaseRow struct {
	Token, Holder string
	Fence         int64
	Live          bool
}

func readRow(t testing.TB, pool *pgxpool.Pool, table, key string) (leaseRow, bool) {
	t.Helper()
	var r leaseRow
	err := pool.QueryRow(context.Background(), `SELECT token, holder, fence, token <> '' AND expires_at > clock_timestamp() FROM `+table+` WHERE name = $1`, key).
		Scan(&r.Token, &r.Holder, &r.Fence, &r.Live)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false
	}
	require.NoError(t, err)
	return r, true
}

// untilFree waits (bounded) until key is not held on c.
func untilFree(t testing.TB, c *pglock.Client, key string, bound time.Duration) {
	t.Helper()
	// Polling the database's view: its clock ends the lease, no event.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		info, err := c.Inspect(context.Background(), key)
		if assert.NoError(ct, err) {
			assert.False(ct, info.Held, "%q still held: %+v", key, info)
		}
	}, bound, 10*time.Millisecond, "%q free within %v", key, bound)
}

// endLeaseIn sets the lease on key to end d from now on the database's
// clock, as a TTL would have: a test's short TTL would race its own
// statements on a loaded machine.
func endLeaseIn(t testing.TB, admin *pgxpool.Pool, table, key string, d time.Duration) {
	t.Helper()
	tag, err := admin.Exec(context.Background(),
		`UPDATE `+table+` SET expires_at = clock_timestamp() + $2 * interval '1 microsecond' WHERE name = $1`, key, d.Microseconds())
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "lease rows named %q", key)
}

// dbNow is the database's clock.
func dbNow(t testing.TB, admin *pgxpool.Pool) time.Time {
	t.Helper()
	var now time.Time
	require.NoError(t, admin.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now))
	return now
}

// ranAfter waits until a backend of application app other than pid has
// finished, after since, a statement containing one of texts, and returns
// which.
func ranAfter(t testing.TB, admin *pgxpool.Pool, app string, pid int32, since time.Time, texts ...string) string {
	t.Helper()
	var ran string
	// Polling the server's view: no event announces a finished statement.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rows, err := admin.Query(context.Background(),
			`SELECT query FROM pg_stat_activity WHERE application_name = $1 AND pid <> $2 AND state = 'idle' AND state_change > $3`, app, pid, since)
		if !assert.NoError(c, err) {
			return
		}
		queries, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if !assert.NoError(c, err) {
			return
		}
		for _, q := range queries {
			for _, s := range texts {
				if strings.Contains(q, s) {
					ran = s
					return
				}
			}
		}
		assert.Fail(c, "not yet", "statements: %q", queries)
	}, 10*time.Second, 5*time.Millisecond, "no backend of %s ran any of %q", app, texts)
	return ran
}
