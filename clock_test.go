package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// The clock tests run real redis-servers under libfaketime and step their
// wall clocks (redistest.StartClock); the README's Guarantees, Clocks,
// state each outcome they show.

// mustObtain obtains key and checks that the grant came back within its
// validity.
func mustObtain(t *testing.T, ctx context.Context, c *redislock.Client, key string, ttl time.Duration) *redislock.Lock {
	t.Helper()
	l, err := c.Obtain(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if now := time.Now(); !now.Before(l.ValidUntil()) {
		t.Fatalf("grant returned at %v, after its validity %v", now, l.ValidUntil())
	}
	return l
}

// mustRelease releases l.
func mustRelease(t *testing.T, ctx context.Context, l *redislock.Lock) {
	t.Helper()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A server clock stepped back while a lock is held keeps the lock longer
// than asked (never shorter): the holder refreshes, others are refused,
// and the next grant's fence is higher.
func TestClockServerStepBackHeld(t *testing.T) {
	t.Parallel()
	srv := redistest.StartClock(t)
	rdb := srv.Client(nil)
	ctx := ctxT(t, 20*time.Second)
	a, b := newClient(t, rdb), newClient(t, rdb)
	la := mustObtain(t, ctx, a, "back", 2*time.Second)
	srv.Step(-time.Hour)
	if pttl := rdb.PTTL(ctx, redislock.LockKey("back")).Val(); pttl < time.Hour {
		t.Fatalf("PTTL %v after the step back: the key's expiry should have moved an hour away", pttl)
	}
	if _, err := b.Obtain(ctx, "back", time.Second); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("contender: %v, want ErrNotObtained", err)
	}
	if err := la.Refresh(ctx, 2*time.Second); err != nil {
		t.Fatalf("holder's refresh: %v", err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb := mustObtain(t, ctx, b, "back", time.Second)
	if lb.Fence() <= la.Fence() {
		t.Fatalf("fence %d after %d", lb.Fence(), la.Fence())
	}
}

// A server clock stepped forward past a held lock's TTL expires it at
// once: another client is granted it while the first still believes it
// holds it (the documented limit). Fences still increase, the stale
// holder's fenced write is refused, and its next Refresh reports the loss.
func TestClockServerStepForwardHeld(t *testing.T) {
	t.Parallel()
	srv := redistest.StartClock(t)
	rdb := srv.Client(nil)
	ctx := ctxT(t, 20*time.Second)
	a, b := newClient(t, rdb), newClient(t, rdb)
	la := mustObtain(t, ctx, a, "fwd", 10*time.Second)
	srv.Step(time.Hour)
	lb := mustObtain(t, ctx, b, "fwd", 10*time.Second)
	if !time.Now().Before(la.ValidUntil()) {
		t.Skip("the machine took 10 s: the first grant's validity ended anyway")
	}
	// Both are within their validity now: the double grant the README states.
	if lb.Fence() <= la.Fence() {
		t.Fatalf("fence %d after %d", lb.Fence(), la.Fence())
	}
	if err := redislock.FencedSet(ctx, rdb, "res", "b", lb.Fence(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := redislock.FencedSet(ctx, rdb, "res", "a", la.Fence(), time.Minute); !errors.Is(err, redislock.ErrStaleFence) {
		t.Fatalf("stale holder's write: %v, want ErrStaleFence", err)
	}
	if err := la.Refresh(ctx, 10*time.Second); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatalf("stale holder's refresh: %v, want ErrNotHeld", err)
	}
}

// Run reports a lock that a forward clock step expired: fn's context is
// cancelled (the next renewal finds the lock gone) and Run returns
// ErrLockLost.
func TestClockServerStepForwardRun(t *testing.T) {
	t.Parallel()
	srv := redistest.StartClock(t)
	c := newClient(t, srv.Client(nil))
	ctx := ctxT(t, 30*time.Second)
	err := c.Run(ctx, "run", 3*time.Second, func(ctx context.Context, l *redislock.Lock) error {
		srv.Step(time.Hour)
		<-ctx.Done()
		return nil
	})
	if !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("Run: %v, want ErrLockLost", err)
	}
}

// After a data loss, a fresh key's fence is the server's clock in µs, so it
// is above the last fence exactly when the server's clock reads later than
// at the key's last grant (the README's limit): here the clock is first a
// minute past the last grant, then two minutes before it.
func TestClockServerDataLoss(t *testing.T) {
	t.Parallel()
	srv := redistest.StartClock(t)
	rdb := srv.Client(nil)
	ctx := ctxT(t, 30*time.Second)
	c := newClient(t, rdb)

	la := mustObtain(t, ctx, c, "loss", time.Second)
	_ = la.Release(ctx)
	// Two hours pass on the server's clock; it restarts without its data
	// and comes back with its clock stepped back by 1h59m: still a minute
	// past the key's last grant.
	srv.Step(2 * time.Hour)
	srv.Restart()
	srv.Step(-2*time.Hour + time.Minute)
	lb := mustObtain(t, ctx, c, "loss", time.Second)
	if lb.Fence() <= la.Fence() {
		t.Fatalf("clock a minute past the last grant: fence %d after %d", lb.Fence(), la.Fence())
	}
	_ = lb.Release(ctx)

	// The data is lost again, and the clock, stepped back two minutes, reads
	// earlier than at the last grant: the fence goes back.
	srv.Restart()
	before := time.Now()
	srv.Step(-2 * time.Minute)
	lc := mustObtain(t, ctx, c, "loss", time.Second)
	if lc.Fence() >= lb.Fence() {
		t.Fatalf("clock a minute before the last grant: fence %d not below %d", lc.Fence(), lb.Fence())
	}
	// And it is the server's clock: a minute before the true time.
	want := before.Add(-time.Minute).UnixMicro()
	if d := time.Duration(lc.Fence()-want) * time.Microsecond; d < 0 || d > 30*time.Second {
		t.Fatalf("fence %d is %v off the server's clock", lc.Fence(), d)
	}
}
