package pglock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease/leasetest"
	"github.com/redislock-go/redislock/pglock"
)

// advisoryHolder returns the pid of the session holding key's advisory
// lock, or 0.
func advisoryHolder(t testing.TB, ctx context.Context, admin interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, key string) int32 {
	t.Helper()
	var pid int32
	err := admin.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1
		AND ((classid::bigint << 32) | objid::bigint) = $1 AND granted`, pglock.AdvisoryID(key)).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	require.NoError(t, err)
	return pid
}

// Session advisory locks exclude each other across pools, all-or-none for
// several keys in any order (no deadlock: canonical order), and are gone
// from pg_locks after Release.
func TestAdvisoryExclusion(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	a := newClient(t, newPool(t), table)
	b := newClient(t, newPool(t), table)
	ctx := ctxFor(t)
	l, err := a.ObtainAdvisory(ctx, []string{"x", "y"})
	require.NoError(t, err)
	require.NotEqual(t, int32(0), advisoryHolder(t, ctx, admin, "x"), "advisory locks not in pg_locks")
	require.NotEqual(t, int32(0), advisoryHolder(t, ctx, admin, "y"), "advisory locks not in pg_locks")
	_, err = b.ObtainAdvisory(ctx, []string{"z", "y"})
	require.ErrorIs(t, err, pglock.ErrNotObtained, "ObtainAdvisory of a held key")
	require.Equal(t, int32(0), advisoryHolder(t, ctx, admin, "z"), "a failed multi-lock kept one of its locks")
	require.NoError(t, l.Release(ctx))
	require.NoError(t, l.Release(ctx), "second Release, want the first's result")
	require.ErrorIs(t, l.Err(), pglock.ErrNotHeld, "Err after Release: %v", l.Err())
	require.Equal(t, int32(0), advisoryHolder(t, ctx, admin, "x"), "advisory lock left after Release")
	// Contention in opposite orders, from two pools.
	var mu sync.Mutex
	n := 0
	leasetest.Exclusion(t, 6, 6, func(ctx context.Context) (func(), error) {
		mu.Lock()
		c, keys := a, []string{"p", "q"}
		if n%2 == 1 {
			c, keys = b, []string{"q", "p"}
		}
		n++
		mu.Unlock()
		h, err := c.ObtainAdvisory(ctx, keys, pglock.WithRetry(pglock.LinearBackoff(time.Millisecond)))
		if err != nil {
			return nil, err
		}
		return func() {
			assert.NoError(t, h.Release(context.Background()), "Release")
		}, nil
	})
}

// Terminating the session that holds an advisory lock cancels its Context
// with ErrLockLost at once; RunAdvisory reports the loss; the lock is free.
func TestAdvisoryConnectionLoss(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	c := newClient(t, newPool(t), table)
	ctx := ctxFor(t)
	err := c.RunAdvisory(ctx, []string{"lost"}, func(ctx context.Context) error {
		terminate(t, admin, advisoryHolder(t, ctx, admin, "lost"))
		<-ctx.Done()
		return nil
	})
	require.ErrorIs(t, err, pglock.ErrLockLost, "RunAdvisory after its session was terminated, want ErrLockLost")
	l, err := newClient(t, newPool(t), table).ObtainAdvisory(ctx, []string{"lost"}, pglock.WithRetry(pglock.LinearBackoff(5*time.Millisecond)))
	require.NoError(t, err, "ObtainAdvisory after the loss")
	_ = l.Release(ctx)
}

// Declared behind a transaction pooler, session advisory locks are
// refused; transaction advisory locks work and exclude each other.
func TestAdvisoryTransactionPooler(t *testing.T) {
	table := newTable(t)
	c := newClient(t, newPool(t), table, pglock.WithTransactionPooler(true))
	ctx := ctxFor(t)
	_, err := c.ObtainAdvisory(ctx, []string{"s"})
	require.ErrorIs(t, err, pglock.ErrSessionRequired, "session advisory lock behind a declared pooler, want ErrSessionRequired")
	inside := make(chan struct{})
	done := make(chan error, 1)
	hctx, release := context.WithCancel(ctx)
	go func() {
		done <- c.RunAdvisoryTx(hctx, []string{"t1", "t2"}, func(ctx context.Context, tx pgx.Tx) error {
			close(inside)
			<-ctx.Done() // held until released
			return ctx.Err()
		})
	}()
	<-inside
	other := newClient(t, newPool(t), table, pglock.WithTransactionPooler(true))
	err = other.RunAdvisoryTx(ctx, []string{"t2"}, func(context.Context, pgx.Tx) error {
		t.Error("fn ran while another transaction held the lock")
		return nil
	})
	require.ErrorIs(t, err, pglock.ErrNotObtained, "RunAdvisoryTx of a held key")
	release()
	require.ErrorIs(t, <-done, context.Canceled, "the holding transaction")
}

// RunAdvisoryTx commits fn's writes and releases the locks with the
// transaction; fn's error rolls back.
func TestAdvisoryTx(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	ctx := ctxFor(t)
	_, err := admin.Exec(ctx, `CREATE TABLE `+table+`_n (v int)`)
	require.NoError(t, err)
	c := newClient(t, newPool(t), table)
	boom := errors.New("boom")
	require.ErrorIs(t, c.RunAdvisoryTx(ctx, []string{"a"}, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+table+`_n VALUES (1)`)
		return errors.Join(err, boom)
	}), boom, "RunAdvisoryTx")
	require.NoError(t, c.RunAdvisoryTx(ctx, []string{"a"}, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+table+`_n VALUES (2)`)
		return err
	}))
	var sum int
	if err := admin.QueryRow(ctx, `SELECT coalesce(sum(v), 0) FROM `+table+`_n`).Scan(&sum); err != nil || sum != 2 {
		t.Fatalf("committed rows sum to %d (%v), want only the second transaction's 2", sum, err)
	}
	require.Equal(t, int32(0), advisoryHolder(t, ctx, admin, "a"), "transaction advisory lock outlived its transaction")
}
