package backend

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease"
)

// The wait limit is a cap: a backend's loop (attempt, Next, wait, Expired)
// against a holder that keeps renewing starts no attempt after the limit
// and returns within the limit plus one attempt's round trip, whatever the
// backoff and however long the holder's lease, with a *lease.WaitLimitError
// carrying the lease the last attempt saw. On the bubble's clock, so that
// every time is exact.
func TestWaitDeadlineCap(t *testing.T) {
	t.Parallel()
	const limit = time.Second
	for _, tc := range []struct {
		backoff, rtt time.Duration
	}{
		{10 * time.Millisecond, 0},
		{10 * time.Millisecond, 7 * time.Millisecond},
		{300 * time.Millisecond, 7 * time.Millisecond},
		{2 * time.Second, 7 * time.Millisecond},          // one wait, cut at the limit
		{300 * time.Millisecond, 400 * time.Millisecond}, // an attempt that ends past the limit
	} {
		t.Run(fmt.Sprintf("backoff %v rtt %v", tc.backoff, tc.rtt), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const seen = 9 * time.Second // the renewing holder's lease, longer than the limit
				start := time.Now()
				d := NewWaitDeadline(context.Background(), limit)
				var last time.Duration // when the last attempt started
				var err error
				for attempt := 1; ; attempt++ {
					if attempt > 1 {
						if err = d.Expired(); err != nil {
							break
						}
					}
					last = time.Since(start)
					time.Sleep(tc.rtt) // the attempt: the lock is held
					var w time.Duration
					if w, err = d.Next(tc.backoff, true, lease.ErrNotObtained, seen); err != nil {
						break
					}
					assert.LessOrEqual(t, w, tc.backoff)
					time.Sleep(w)
				}
				assert.Less(t, last, limit, "an attempt started after the limit")
				assert.LessOrEqual(t, time.Since(start), limit+tc.rtt, "returned later than the limit plus one round trip")
				var wl *lease.WaitLimitError
				require.ErrorAs(t, err, &wl)
				assert.ErrorIs(t, err, lease.ErrNotObtained)
				assert.Equal(t, limit, wl.Limit)
				assert.Equal(t, seen, wl.TTL)
				assert.Equal(t, "redislock: lock not obtained: wait limit 1s reached, held for 9s more", err.Error())
			})
		})
	}
}

// A context's deadline bounds the wait instead of the limit: Expired never
// ends it (the context does), and a Next past the deadline joins
// context.DeadlineExceeded to the attempt's error. A retry strategy that
// gives up ends the call with the attempt's error.
func TestWaitDeadlineContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		d := NewWaitDeadline(ctx, time.Millisecond) // the limit does not apply
		w, err := d.Next(300*time.Millisecond, true, lease.ErrNotObtained, -1)
		require.NoError(t, err)
		assert.Equal(t, 300*time.Millisecond, w)
		time.Sleep(2 * time.Second)
		require.NoError(t, d.Expired())
		_, err = d.Next(300*time.Millisecond, true, lease.ErrNotObtained, -1)
		assert.ErrorIs(t, err, lease.ErrNotObtained)
		assert.ErrorIs(t, err, context.DeadlineExceeded)

		_, err = d.Next(0, false, lease.ErrNotObtained, -1)
		assert.Same(t, lease.ErrNotObtained, err)
	})
}

// A lease seen as unknown is reported so: the error names no remaining TTL.
func TestWaitDeadlineUnknownLease(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		d := NewWaitDeadline(context.Background(), time.Second)
		w, err := d.Next(5*time.Second, true, lease.ErrNotObtained, -1)
		require.NoError(t, err)
		assert.Equal(t, time.Second, w, "a wait reaches no further than the limit")
		time.Sleep(w)
		err = d.Expired()
		var wl *lease.WaitLimitError
		require.ErrorAs(t, err, &wl)
		assert.Negative(t, wl.TTL)
		assert.Equal(t, "redislock: lock not obtained: wait limit 1s reached", err.Error())
	})
}
