package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/pglock"
)

// RunTx commits fn's fenced write; a write under an older fence is refused
// by the row's fence; fn's error rolls back; a lease lost before COMMIT
// rolls back too.
func TestRunTx(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	ctx := ctxFor(t)
	data := table + "_account"
	_, err := admin.Exec(ctx, `CREATE TABLE `+data+` (id int PRIMARY KEY, balance int NOT NULL, fence bigint NOT NULL);
		INSERT INTO `+data+` VALUES (1, 0, 0)`)
	require.NoError(t, err)
	c := newClient(t, newPool(t), table)
	deposit := func(amount int) func(ctx context.Context, tx pgx.Tx, l *pglock.Lock) error {
		return func(ctx context.Context, tx pgx.Tx, l *pglock.Lock) error {
			tag, err := tx.Exec(ctx, `UPDATE `+data+` SET balance = balance + $1, fence = $2 WHERE id = 1 AND fence <= $2`, amount, l.Fence())
			if err == nil && tag.RowsAffected() != 1 {
				err = pglock.ErrStaleFence
			}
			return err
		}
	}
	balance := func() (b int, fence int64) {
		require.NoError(t, admin.QueryRow(ctx, `SELECT balance, fence FROM `+data+` WHERE id = 1`).Scan(&b, &fence))
		return b, fence
	}
	require.NoError(t, c.RunTx(ctx, "acct", 10*time.Second, deposit(10)))
	if b, f := balance(); b != 10 || f == 0 {
		t.Fatalf("after a deposit: balance %d fence %d", b, f)
	}
	boom := errors.New("boom")
	err = c.RunTx(ctx, "acct", 10*time.Second, func(ctx context.Context, tx pgx.Tx, l *pglock.Lock) error {
		return errors.Join(deposit(5)(ctx, tx, l), boom)
	})
	require.ErrorIs(t, err, boom, "RunTx with a failing fn")
	if b, _ := balance(); b != 10 {
		t.Fatalf("balance %d after a failed fn, want 10", b)
	}
	// The lease is taken away before COMMIT: Verify refuses, the deposit
	// rolls back.
	err = c.RunTx(ctx, "acct", 10*time.Second, func(ctx context.Context, tx pgx.Tx, l *pglock.Lock) error {
		if err := deposit(100)(ctx, tx, l); err != nil {
			return err
		}
		_, err := admin.Exec(ctx, `UPDATE `+table+` SET token = 'thief' WHERE name = 'acct'`)
		return err
	})
	require.ErrorIs(t, err, pglock.ErrNotHeld, "RunTx whose lease was taken before COMMIT, want ErrNotHeld")
	if b, _ := balance(); b != 10 {
		t.Fatalf("balance %d after a lost lease, want 10", b)
	}
	// An older fence is refused by the data row itself.
	_, newest := balance()
	tx, err := admin.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	tag, err := tx.Exec(ctx, `UPDATE `+data+` SET balance = 0, fence = $1 WHERE id = 1 AND fence <= $1`, newest-1)
	require.NoError(t, err, "write with an older fence, %d rows", tag.RowsAffected())
	require.Equal(t, int64(0), tag.RowsAffected(), "write with an older fence: %v, %d rows", err, tag.RowsAffected())
}

// Verify holds the lease row until the transaction ends: a takeover after
// the lease expired waits for the COMMIT, then gets a higher fence.
func TestVerifyBlocksTakeover(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	ctx := ctxFor(t)
	a := newClient(t, newPool(t), table)
	b := newClient(t, appPool(t, "pglock-verify"), table)
	l, err := a.Obtain(ctx, "v", time.Second) // Verify inside it on a loaded machine
	require.NoError(t, err)
	tx, err := admin.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	require.NoError(t, l.Verify(ctx, tx))
	untilFree(t, a, "v", 5*time.Second) // expired on the database's clock; tx still holds the row
	got := make(chan *pglock.Lock, 1)
	go func() {
		l, err := b.Obtain(ctx, "v", 10*time.Second)
		assert.NoError(t, err, "takeover")
		got <- l
	}()
	blockedBackend(t, admin, "pglock-verify")
	require.NoError(t, tx.Commit(ctx))
	taken := <-got
	if taken == nil {
		t.FailNow()
	}
	defer taken.Release(ctx)
	require.Greater(t, taken.Fence(), l.Fence(), "takeover fence %d after %d", taken.Fence(), l.Fence())
	tx2, err := admin.Begin(ctx)
	require.NoError(t, err)
	defer tx2.Rollback(ctx)
	require.ErrorIs(t, l.Verify(ctx, tx2), pglock.ErrNotHeld, "Verify of the taken-over grant, want ErrNotHeld")
}
