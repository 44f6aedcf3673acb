package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// requireEnv makes the PostgreSQL tests mandatory (.ci/run sets it).
const requireEnv = "REDISLOCK_REQUIRE_POSTGRES"

func databaseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return DefaultDatabaseURL
}

// postgres returns a pool on the test PostgreSQL and a fresh table name
// (dropped when the test ends), or skips t when no PostgreSQL answers.
func postgres(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, databaseURL())
	if err == nil {
		err = pool.Ping(ctx)
		if err != nil {
			pool.Close()
		}
	}
	if err != nil {
		require.NotEqual(t, "1", os.Getenv(requireEnv), "PostgreSQL at %s: %v (%s=1)", databaseURL(), err, requireEnv)
		t.Skipf("no PostgreSQL at %s: %v; skipping (set %s=1 to make this a failure)", databaseURL(), err, requireEnv)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	table := "fencedsql_test_" + hex.EncodeToString(b)
	if err := CreateAccounts(ctx, pool, table); err != nil {
		pool.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), `DROP TABLE `+pgx.Identifier{table}.Sanitize())
		assert.NoError(t, err, "drop %s", table)
		pool.Close()
	})
	return pool, table
}

// The UPDATE goes through only with a fence above the row's.
func TestSetBalance(t *testing.T) {
	db, table := postgres(t)
	ctx := context.Background()
	require.NoError(t, OpenAccount(ctx, db, table, 1, 100))
	for _, step := range []struct {
		fence   int64
		balance int64
		stale   bool
	}{{5, 110, false}, {5, 120, true}, {4, 130, true}, {6, 140, false}, {1, 150, true}} {
		err := SetBalance(ctx, db, table, 1, step.balance, step.fence)
		if got := errors.Is(err, redislock.ErrStaleFence); got != step.stale || !step.stale && err != nil {
			t.Errorf("SetBalance(fence %d) = %v, stale want %v", step.fence, err, step.stale)
		}
	}
	if b, f, err := Balance(ctx, db, table, 1); err != nil || b != 140 || f != 6 {
		t.Errorf("account = %d, fence %d, %v; want 140 written by fence 6", b, f, err)
	}
	if err := SetBalance(ctx, db, table, 2, 1, 99); err == nil || errors.Is(err, redislock.ErrStaleFence) {
		t.Errorf("SetBalance on a missing account = %v, want a distinct error", err)
	}
}

// A holder whose lease ended on Redis, and whose successor wrote, cannot
// write any more.
func TestStaleHolderRefused(t *testing.T) {
	db, table := postgres(t)
	srv := redistest.Start(t)
	ctx := context.Background()
	require.NoError(t, OpenAccount(ctx, db, table, 7, 100))
	a := redislock.New(srv.Client(nil))
	defer a.Close()
	b := redislock.New(srv.Client(nil))
	defer b.Close()
	old, err := a.Obtain(ctx, "account:7", 300*time.Millisecond) // never renewed: A stalls
	require.NoError(t, err)
	cur, err := b.Obtain(ctx, "account:7", 5*time.Second, redislock.WithRetry(redislock.LinearBackoff(50*time.Millisecond)))
	require.NoError(t, err, "B waiting for A's lease to end")
	defer cur.Release(ctx)
	require.NoError(t, SetBalance(ctx, db, table, 7, 150, cur.Fence()))
	assert.ErrorIs(t, SetBalance(ctx, db, table, 7, 90, old.Fence()), redislock.ErrStaleFence, "A's write after B's, want ErrStaleFence")
	assert.ErrorIs(t, old.Release(ctx), redislock.ErrNotHeld, "A's Release, want ErrNotHeld")
	if bal, f, _ := Balance(ctx, db, table, 7); bal != 150 || f != cur.Fence() {
		t.Errorf("account = %d by fence %d, want 150 by B's %d", bal, f, cur.Fence())
	}
}

// Holders in turn (Run) each read, add one and write with their fence:
// every write goes through and none is lost.
func TestHoldersInTurn(t *testing.T) {
	db, table := postgres(t)
	srv := redistest.Start(t)
	ctx := context.Background()
	require.NoError(t, OpenAccount(ctx, db, table, 3, 0))
	const workers, rounds = 4, 10
	var wg sync.WaitGroup
	for range workers {
		c := redislock.New(srv.Client(nil))
		defer c.Close()
		wg.Go(func() {
			for range rounds {
				err := c.Run(ctx, "account:3", 2*time.Second, func(ctx context.Context, l *redislock.Lock) error {
					bal, _, err := Balance(ctx, db, table, 3)
					if err != nil {
						return err
					}
					return SetBalance(ctx, db, table, 3, bal+1, l.Fence())
				}, redislock.WithRetry(redislock.LinearBackoff(5*time.Millisecond)))
				if err != nil {
					t.Errorf("Run: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if bal, _, err := Balance(ctx, db, table, 3); err != nil || bal != workers*rounds {
		t.Errorf("balance %d, %v; want %d", bal, err, workers*rounds)
	}
}

// The program's demo runs against a real Redis.
func TestDemo(t *testing.T) {
	postgres(t) // skips without PostgreSQL
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.NoError(t, demo(ctx, conn, srv.Client(nil)))
}
