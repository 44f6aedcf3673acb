package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/pglock"
)

// Waiters without a ctx deadline do not give up on a holder that is alive
// and renewing its lease (of 1 s: renewals that get through on a loaded
// machine) for several of the waiters' TTLs: the default wait limit is far
// longer than one TTL.
func TestWaitOutlivesRenewingHolder(t *testing.T) {
	pool, table := newPool(t), newTable(t)
	holder, waiters := newClient(t, pool, table), newClient(t, pool, table)
	const ttl = 300 * time.Millisecond // the waiters'
	locked := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		err := holder.Run(context.Background(), "fill", time.Second, func(ctx context.Context, l *pglock.Lock) error {
			close(locked)
			time.Sleep(4 * ttl) // the work: four of the waiters' TTLs, past the holder's first lease
			return ctx.Err()
		})
		assert.NoError(t, err)
	})
	<-locked
	errs := make(chan error, 4)
	for range cap(errs) {
		wg.Go(func() {
			l, err := waiters.Obtain(context.Background(), "fill", ttl, pglock.WithRetry(pglock.LinearBackoff(10*time.Millisecond)))
			if err == nil {
				err = l.Release(context.Background())
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "a waiter gave up on a live holder")
	}
}

// WithMaxWait is a cap: a waiter whose limit passes while the holder's
// lease, seen about to end within the TTL the waiter asks for, still runs
// gives up then, with a *lease.WaitLimitError carrying that lease, instead
// of waiting for the lease to end. It returns while the holder still holds
// its first lease, so it waited no lease out. Notified and polling.
func TestWaitLimitIsACap(t *testing.T) {
	const ttl = 5 * time.Second // the holder's, and the TTL the waiter asks for
	const limit = 100 * time.Millisecond
	pool, table := newPool(t), newTable(t)
	for _, notify := range []bool{true, false} {
		t.Run(fmt.Sprintf("notify %v", notify), func(t *testing.T) {
			c := newClient(t, pool, table, pglock.WithNotify(notify))
			ctx := ctxFor(t)
			key := fmt.Sprintf("capped-%v", notify)
			h, err := c.Obtain(ctx, key, ttl)
			require.NoError(t, err)
			l, err := c.Obtain(context.Background(), key, ttl,
				pglock.WithRetry(pglock.LinearBackoff(20*time.Millisecond)), pglock.WithMaxWait(limit))
			if err == nil {
				_ = l.Release(ctx)
			}
			var wl *lease.WaitLimitError
			require.ErrorAs(t, err, &wl, "the waiter did not stop at its wait limit")
			assert.ErrorIs(t, err, pglock.ErrNotObtained)
			assert.Equal(t, limit, wl.Limit)
			assert.Greater(t, wl.TTL, limit, "the lease seen at the limit")
			left, err := h.TTL(ctx)
			require.NoError(t, err, "the holder's first lease ended before the waiter returned")
			assert.Positive(t, left)
			require.NoError(t, h.Release(ctx))
		})
	}
}

// At the wait limit, the error says so, matches ErrNotObtained and carries
// the remaining lease seen, for a lease longer than the TTL asked for.
func TestWaitLimitError(t *testing.T) {
	c := newClient(t, newPool(t), newTable(t))
	ctx := ctxFor(t)
	_, err := c.Obtain(ctx, "long", time.Minute)
	require.NoError(t, err)
	_, err = c.Obtain(context.Background(), "long", time.Second,
		pglock.WithRetry(pglock.LinearBackoff(10*time.Millisecond)), pglock.WithMaxWait(50*time.Millisecond))
	var wl *lease.WaitLimitError
	require.ErrorIs(t, err, pglock.ErrNotObtained, "Obtain = %#v (%v), want a *WaitLimitError matching ErrNotObtained with the lease seen", err, err)
	require.True(t, errors.As(err, &wl), "Obtain = %#v (%v), want a *WaitLimitError matching ErrNotObtained with the lease seen", err, err)
	require.Equal(t, time.Duration(50*time.Millisecond), wl.Limit, "Obtain = %#v (%v), want a *WaitLimitError matching ErrNotObtained with the lease seen", err, err)
	require.Greater(t, wl.TTL, time.Duration(30*time.Second), "Obtain = %#v (%v), want a *WaitLimitError matching ErrNotObtained with the lease seen", err, err)
}
