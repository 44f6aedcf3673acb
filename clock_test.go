package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/require"
)

// The clock tests run real redis-servers under libfaketime and step their
// wall clocks (redistest.StartClock); the README's Guarantees, Clocks,
// state each outcome they show.

// obtainInValidity obtains key and checks that the grant came back within its
// validity.
func obtainInValidity(t *testing.T, ctx context.Context, c *redislock.Client, key string, ttl time.Duration) *redislock.Lock {
	t.Helper()
	l, err := c.Obtain(ctx, key, ttl)
	require.NoError(t, err)
	now := time.Now()
	require.True(t, now.Before(l.ValidUntil()), "grant returned at %v, after its validity %v", now, l.ValidUntil())
	return l
}

// A server clock stepped back while a lock is held keeps the lock longer
// than asked (never shorter): the holder refreshes, others are refused,
// and the next grant's fence is higher.
func TestClockServerStepBackHeld(t *testing.T) {
	t.Parallel()
	srv := redistest.StartClock(t)
	rdb := srv.Client(nil)
	ctx := testkit.Context(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	la := obtainInValidity(t, ctx, a, "back", 2*time.Second)
	srv.Step(-time.Hour)
	require.GreaterOrEqual(t, rdb.PTTL(ctx, redislock.LockKey("back")).Val(), time.Hour, "PTTL after the step back: the key's expiry should have moved an hour away")
	_, err := b.Obtain(ctx, "back", time.Second)
	require.ErrorIs(t, err, redislock.ErrNotObtained, "contender, want ErrNotObtained")
	require.NoError(t, la.Refresh(ctx, 2*time.Second), "holder's refresh")
	require.NoError(t, la.Release(ctx))
	lb := obtainInValidity(t, ctx, b, "back", time.Second)
	require.Greater(t, lb.Fence(), la.Fence(), "fence after %d", la.Fence())
}

// A server clock stepped forward past a held lock's TTL expires it at
// once: another client is granted it while the first still believes it
// holds it (the documented limit). Fences still increase, the stale
// holder's fenced write is refused, and its next Refresh reports the loss.
func TestClockServerStepForwardHeld(t *testing.T) {
	t.Parallel()
	srv := redistest.StartClock(t)
	rdb := srv.Client(nil)
	ctx := testkit.Context(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	la := obtainInValidity(t, ctx, a, "fwd", 10*time.Second)
	srv.Step(time.Hour)
	lb := obtainInValidity(t, ctx, b, "fwd", 10*time.Second)
	if !time.Now().Before(la.ValidUntil()) {
		t.Skip("the machine took 10 s: the first grant's validity ended anyway")
	}
	// Both are within their validity now: the double grant the README states.
	require.Greater(t, lb.Fence(), la.Fence(), "fence after %d", la.Fence())
	require.NoError(t, redislock.FencedSet(ctx, rdb, "res", "b", lb.Fence(), time.Minute))
	require.ErrorIs(t, redislock.FencedSet(ctx, rdb, "res", "a", la.Fence(), time.Minute), redislock.ErrStaleFence, "stale holder's write, want ErrStaleFence")
	require.ErrorIs(t, la.Refresh(ctx, 10*time.Second), redislock.ErrNotHeld, "stale holder's refresh, want ErrNotHeld")
}

// Run reports a lock that a forward clock step expired: fn's context is
// cancelled (the next renewal finds the lock gone) and Run returns
// ErrLockLost.
func TestClockServerStepForwardRun(t *testing.T) {
	t.Parallel()
	srv := redistest.StartClock(t)
	c := newClient(t, srv.Client(nil))
	ctx := testkit.Context(t)
	err := c.Run(ctx, "run", 3*time.Second, func(ctx context.Context, l *redislock.Lock) error {
		srv.Step(time.Hour)
		<-ctx.Done()
		return nil
	})
	require.ErrorIs(t, err, redislock.ErrLockLost, "Run, want ErrLockLost")
}

// After a data loss, a fresh key's fence is the server's clock in µs, so it
// is above the last fence exactly when the server's clock reads later than
// at the key's last grant (the README's limit): here the clock is first a
// minute past the last grant, then two minutes before it.
func TestClockServerDataLoss(t *testing.T) {
	t.Parallel()
	srv := redistest.StartClock(t)
	rdb := srv.Client(nil)
	ctx := testkit.Context(t)
	c := newClient(t, rdb)

	la := obtainInValidity(t, ctx, c, "loss", time.Second)
	_ = la.Release(ctx)
	// Two hours pass on the server's clock; it restarts without its data
	// and comes back with its clock stepped back by 1h59m: still a minute
	// past the key's last grant.
	srv.Step(2 * time.Hour)
	srv.Restart()
	srv.Step(-2*time.Hour + time.Minute)
	lb := obtainInValidity(t, ctx, c, "loss", time.Second)
	require.Greater(t, lb.Fence(), la.Fence(), "clock a minute past the last grant: fence after %d", la.Fence())
	_ = lb.Release(ctx)

	// The data is lost again, and the clock, stepped back two minutes, reads
	// earlier than at the last grant: the fence goes back.
	srv.Restart()
	before := time.Now()
	srv.Step(-2 * time.Minute)
	lc := obtainInValidity(t, ctx, c, "loss", time.Second)
	require.Less(t, lc.Fence(), lb.Fence(), "clock a minute before the last grant: fence not below %d", lb.Fence())
	// And it is the server's clock: a minute before the true time.
	want := before.Add(-time.Minute).UnixMicro()
	d := time.Duration(lc.Fence()-want) * time.Microsecond
	require.GreaterOrEqual(t, d, time.Duration(0), "fence %d is off the server's clock", lc.Fence())
	require.LessOrEqual(t, d, 30*time.Second, "fence %d is off the server's clock", lc.Fence())
}
