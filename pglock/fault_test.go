package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redislock-go/redislock/lease/leasetest"
	"github.com/redislock-go/redislock/pglock"
)

// lockedRow makes key's lease row (released) and returns a transaction of
// admin that holds the row's lock, as a grant in progress would; it is
// rolled back at the end of t unless committed.
func lockedRow(t *testing.T, ctx context.Context, c *pglock.Client, admin *pgxpool.Pool, table, key string) pgx.Tx {
	t.Helper()
	l, err := c.Obtain(ctx, key, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	tx, err := admin.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx, `SELECT 1 FROM `+table+` WHERE name = $1 FOR UPDATE`, key)
	require.NoError(t, err)
	return tx
}

// A takeover whose statement waited for the row's lock gets a fence above
// the grant that committed while it waited: the fence is drawn under the
// row's lock, not when the statement started.
func TestTakeoverFenceDrawnUnderRowLock(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	c := newClient(t, appPool(t, "pglock-fence"), table)
	ctx := ctxFor(t)
	key := "fence-race"
	// Another client's grant is in progress: it holds the row's lock.
	tx := lockedRow(t, ctx, c, admin, table, key)
	got := make(chan *pglock.Lock, 1)
	go func() {
		l, err := c.Obtain(ctx, key, 10*time.Second)
		assert.NoError(t, err, "Obtain")
		got <- l
	}()
	blockedBackend(t, admin, "pglock-fence") // its statement has started: VALUES drew a fence
	var competing int64
	require.NoError(t, tx.QueryRow(ctx, `UPDATE `+table+` SET token = 'competing', fence = nextval('`+table+`_fence'),
		expires_at = clock_timestamp() - interval '1 second' WHERE name = $1 RETURNING fence`, key).Scan(&competing))
	require.NoError(t, tx.Commit(ctx))
	taken := <-got
	if taken == nil {
		t.FailNow()
	}
	defer taken.Release(ctx)
	require.Greater(t, taken.Fence(), competing, "takeover fence %d is not above the competing grant's %d that committed before it", taken.Fence(), competing)
}

// pg_terminate_backend of a connection whose acquire statement waits for
// the row leaves no lock: the statement is rolled back, Obtain returns the
// error (not a Lock, not ErrNotObtained), and the row is as it was.
func TestTerminateDuringObtain(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	c := newClient(t, appPool(t, "pglock-term-obtain"), table)
	ctx := ctxFor(t)
	key := "terminated"
	tx := lockedRow(t, ctx, c, admin, table, key)
	type result struct {
		l   *pglock.Lock
		err error
	}
	res := make(chan result, 1)
	go func() {
		l, err := c.Obtain(ctx, key, 10*time.Second)
		res <- result{l, err}
	}()
	terminate(t, admin, blockedBackend(t, admin, "pglock-term-obtain"))
	r := <-res
	require.False(t, r.l != nil, "Obtain on a terminated connection: %v, %v; want an error that is not ErrNotObtained", r.l, r.err)
	require.False(t, r.err == nil, "Obtain on a terminated connection: %v, %v; want an error that is not ErrNotObtained", r.l, r.err)
	require.False(t, errors.Is(r.err, pglock.ErrNotObtained), "Obtain on a terminated connection: %v, %v; want an error that is not ErrNotObtained", r.l, r.err)
	require.NoError(t, tx.Commit(ctx))
	if row, _ := readRow(t, admin, table, key); row.Live {
		t.Fatalf("phantom lock after the terminated Obtain: %+v", row)
	}
	l2, err := newClient(t, newPool(t), table).Obtain(ctx, key, time.Second)
	require.NoError(t, err, "Obtain after the terminated one")
	_ = l2.Release(ctx)
}

// An acquire statement cut off on the client (its ctx ended) that goes on
// to grant the lock on the server is released once it has ended: no
// phantom lock outlives it.
func TestCutOffObtainIsReleased(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	c := newClient(t, appPool(t, "pglock-cutoff"), table)
	ctx := ctxFor(t)
	key := "cut-off"
	tx := lockedRow(t, ctx, c, admin, table, key)
	octx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		l, err := c.Obtain(octx, key, time.Minute)
		if l != nil {
			t.Error("granted a lock on a cancelled context")
		}
		res <- err
	}()
	blocked := blockedBackend(t, admin, "pglock-cutoff")
	since := dbNow(t, admin)
	cancel()
	require.ErrorIs(t, <-res, context.Canceled, "Obtain cut off, want context.Canceled")
	// The Client's clean-up of the unknown grant has begun (a release
	// that ran now would find nothing to release).
	ranAfter(t, admin, "pglock-cutoff", blocked, since, "pg_stat_activity", "pg_notify")
	// The server's statement is still waiting for the row; it grants the
	// lock (a minute's lease) once the row is free.
	require.NoError(t, tx.Commit(ctx))
	untilFree(t, c, key, 10*time.Second)
}

// pg_terminate_backend of the connection of RunTx's transaction, while fn
// runs, leaves neither fn's writes nor the lock: PostgreSQL rolls the
// transaction back, RunTx returns the error and releases the lease.
func TestTerminateMidTransaction(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	ctx := ctxFor(t)
	_, err := admin.Exec(ctx, `CREATE TABLE `+table+`_data (id int PRIMARY KEY, fence bigint NOT NULL)`)
	require.NoError(t, err)
	c := newClient(t, newPool(t), table)
	key := "mid-tx"
	err = c.RunTx(ctx, key, 10*time.Second, func(ctx context.Context, tx pgx.Tx, l *pglock.Lock) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+table+`_data VALUES (1, $1)`, l.Fence()); err != nil {
			return err
		}
		var pid int32
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		terminate(t, admin, pid)
		_, err := tx.Exec(ctx, `UPDATE `+table+`_data SET fence = fence WHERE id = 1`)
		return err
	})
	require.Error(t, err, "RunTx on a terminated connection succeeded")
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM `+table+`_data`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows written by the terminated transaction: %d (%v); want none", n, err)
	}
	if row, _ := readRow(t, admin, table, key); row.Live {
		t.Fatalf("lease left held after RunTx returned: %+v", row)
	}
	l, err := newClient(t, newPool(t), table).Obtain(ctx, key, time.Second)
	require.NoError(t, err, "Obtain after the terminated RunTx")
	_ = l.Release(ctx)
}

// Run detects a loss when renewals cannot get through: every connection of
// the pool is taken, so the renewal waits, and fn's ctx is cancelled at
// ValidUntil with ErrLeaseExpired.
func TestRunDetectsStalledRenewals(t *testing.T) {
	table := newTable(t)
	p := newPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	c := newClient(t, p, table)
	ctx := ctxFor(t)
	var until time.Time
	err := c.Run(ctx, "stalled", 300*time.Millisecond, func(fctx context.Context, l *pglock.Lock) error {
		until = l.ValidUntil()
		conn, err := p.Acquire(ctx) // the pool's only connection: renewals wait for it
		if err != nil {
			return err
		}
		defer conn.Release()
		<-fctx.Done()
		// The watchdog's timer, not the stuck renewal, ends fn: without
		// it nothing would before ctx's 30 s. The second is scheduling
		// slack for a loaded machine, not a speed requirement.
		assert.False(t, time.Now().After(until.Add(time.Second)), "fn's ctx cancelled %v after ValidUntil", time.Since(until))
		return nil
	}, pglock.WithRefreshInterval(50*time.Millisecond))
	require.ErrorIs(t, err, pglock.ErrLockLost, "Run with stalled renewals, want ErrLockLost and ErrLeaseExpired")
	require.ErrorIs(t, err, pglock.ErrLeaseExpired, "Run with stalled renewals, want ErrLockLost and ErrLeaseExpired")
}

// A stale holder, whose lease expired and was taken over, can neither renew
// nor release, and the new grant, with a higher fence, is untouched in the
// table.
func TestStaleHolder(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	a := newClient(t, newPool(t), table)
	b := newClient(t, newPool(t), table)
	ctx := ctxFor(t)
	key := "stale"
	stale, err := a.Obtain(ctx, key, 200*time.Millisecond, pglock.WithHolder("a"))
	require.NoError(t, err)
	untilFree(t, b, key, 5*time.Second)
	fresh, err := b.Obtain(ctx, key, 10*time.Second, pglock.WithHolder("b"))
	require.NoError(t, err)
	defer fresh.Release(ctx)
	require.Greater(t, fresh.Fence(), stale.Fence(), "takeover fence %d, not above the expired grant's %d", fresh.Fence(), stale.Fence())
	require.ErrorIs(t, stale.Refresh(ctx, time.Minute), pglock.ErrNotHeld, "stale Refresh, want ErrNotHeld")
	require.ErrorIs(t, stale.Release(ctx), pglock.ErrNotHeld, "stale Release, want ErrNotHeld")
	_, err = stale.TTL(ctx)
	require.ErrorIs(t, err, pglock.ErrNotHeld, "stale TTL, want ErrNotHeld")
	row, ok := readRow(t, admin, table, key)
	require.True(t, ok, "row after the stale holder's calls: %+v, want b's live grant (fence %d)", row, fresh.Fence())
	require.True(t, row.Live, "row after the stale holder's calls: %+v, want b's live grant (fence %d)", row, fresh.Fence())
	require.Equal(t, fresh.Token(), row.Token, "row after the stale holder's calls: %+v, want b's live grant (fence %d)", row, fresh.Fence())
	require.Equal(t, fresh.Fence(), row.Fence, "row after the stale holder's calls: %+v, want b's live grant (fence %d)", row, fresh.Fence())
	require.Equal(t, "b", row.Holder, "row after the stale holder's calls: %+v, want b's live grant (fence %d)", row, fresh.Fence())
	if ttl, err := fresh.TTL(ctx); err != nil || ttl <= 9*time.Second {
		t.Fatalf("fresh TTL %v, %v: the stale Refresh must not have changed it", ttl, err)
	}
}

// Mutual exclusion under contention from several pools (processes, in
// effect), with notified waiting and without.
func TestExclusionSeveralPools(t *testing.T) {
	table := newTable(t)
	var clients []*pglock.Client
	for range 3 {
		clients = append(clients, newClient(t, newPool(t), table))
	}
	for _, notify := range []bool{true, false} {
		next := make(chan int, 1)
		next <- 0
		leasetest.Exclusion(t, 6, 8, func(ctx context.Context) (func(), error) {
			i := <-next
			next <- i + 1
			l, err := clients[i%len(clients)].Obtain(ctx, "hot", 10*time.Second,
				pglock.WithRetry(pglock.ExponentialBackoff(time.Millisecond, 20*time.Millisecond)), pglock.WithNotify(notify))
			if err != nil {
				return nil, err
			}
			return func() {
				assert.NoError(t, l.Release(context.Background()), "Release")
			}, nil
		})
	}
}
