package pglock_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
	if os.Getenv("REDISLOCK_REQUIRE_POSTGRES") == "1" {
		t.Fatal(msg + " (REDISLOCK_REQUIRE_POSTGRES=1)")
	}
	t.Skip(msg)
}

// newPool returns a pool on the test database, closed at the end of t.
func newPool(t testing.TB, tweak ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	needPostgres(t)
	cfg, err := pgxpool.ParseConfig(dsn())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tweak {
		f(cfg)
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// newTable makes a schema of t's own and returns a lease table name in it;
// the schema is dropped at the end of t.
func newTable(t testing.TB) string {
	t.Helper()
	admin := newPool(t)
	schema := "pglock_test_" + strings.ToLower(rand.Text()[:12])
	if _, err := admin.Exec(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema + ".leases"
}

// newClient returns a Client on pool for table, closed at the end of t.
func newClient(t testing.TB, pool *pgxpool.Pool, table string, opts ...pglock.ClientOption) *pglock.Client {
	t.Helper()
	c, err := pglock.New(context.Background(), pool, append([]pglock.ClientOption{pglock.WithTable(table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// breakOn deletes a lease row behind its holder's back, as an operator's
// DELETE would.
func breakOn(t testing.TB, pool *pgxpool.Pool, table string) func(key string) {
	return func(key string) {
		if _, err := pool.Exec(context.Background(), "DELETE FROM "+table+" WHERE name = $1", key); err != nil {
			t.Errorf("break %q: %v", key, err)
		}
	}
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
