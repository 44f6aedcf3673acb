package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redislock-go/redislock/lease"
)

func testHoldDetectsLoss(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	// Renewed every interval, a TTL of many intervals: each renewal has
	// most of a TTL to get through on a loaded machine (renewals held up
	// for 3 s were seen at a load of 20 on 2 cores), and the loss below can
	// only be the renewal's finding (the lease does not run out first).
	interval := 100 * time.Millisecond
	ttl := max(3*e.TTL, 100*interval)
	l := mustObtain(t, e.Locker, key, ttl)
	h, err := lease.Hold(ctx, l, ttl, lease.WithRefreshInterval(interval))
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	defer h.Release(ctx)
	// Renewals keep it past its first validity: wait, on the backend's
	// clock, until that has passed, then see it held. The backend must
	// show it held if the validity read before Inspect was still running
	// when Inspect returned; if that ran out meanwhile (a renewal late on
	// a loaded machine) the answer tells nothing, and the next renewal's
	// is awaited.
	first := l.ValidUntil()
	for held := false; !held; {
		e.Sleep(interval)
		if err := h.Err(); err != nil {
			t.Fatalf("Err after renewals: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatal("the lock was not seen held past its first validity")
		}
		vu := l.ValidUntil()
		if !e.Now().After(first) {
			continue
		}
		info, err := e.Other.Inspect(ctx, key)
		switch {
		case err != nil: // no answer (a call timed out on a loaded machine): ask again
			t.Logf("Inspect: %v", err)
		case info.Held:
			held = true
		case e.Now().Before(vu):
			t.Fatalf("renewed lock, valid until %v: %+v", vu, info)
		}
	}
	e.Break(key)
	// The next renewal finds it gone: wait for Done (a fake clock moves on
	// by the interval meanwhile).
	for done := false; !done; {
		e.Sleep(interval)
		select {
		case <-h.Done():
			done = true
		case <-ctx.Done():
			t.Fatal("Done not closed after the lock was broken and renewals came due")
		default:
		}
	}
	wantIs(t, "Err after the loss", h.Err(), lease.ErrLockLost, lease.ErrNotHeld)
	wantIs(t, "Context cause", context.Cause(h.Context()), lease.ErrLockLost)
	wantIs(t, "Release after the loss", h.Release(ctx), lease.ErrNotHeld)
}

// testRunReleasedByFn: a Release of the lock inside Run's fn gives it up
// early: fn's ctx is done when that Release returns, its cause matching
// lease.ErrReleased; the lock is free at once; Run returns an error
// matching lease.ErrReleased (and fn's own), not ErrLockLost.
func testRunReleasedByFn(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	errFn := errors.New("fn went on")
	err := lease.Run(ctx, e.Locker, key, 10*time.Second, func(fctx context.Context, l lease.Lock) error {
		if err := l.Release(ctx); err != nil {
			t.Errorf("Release inside fn: %v", err)
		}
		if fctx.Err() == nil {
			t.Error("fn's ctx not done after fn released the lock")
		}
		if cause := context.Cause(fctx); !errors.Is(cause, lease.ErrReleased) {
			t.Errorf("cause of fn's ctx: %v, want an error matching %v", cause, lease.ErrReleased)
		}
		if !l.ValidUntil().IsZero() {
			t.Errorf("ValidUntil %v after Release", l.ValidUntil())
		}
		mustObtain(t, e.Other, key, time.Second) // free: one attempt
		return errFn
	})
	wantIs(t, "Run whose fn released the lock", err, lease.ErrReleased, errFn)
	if errors.Is(err, lease.ErrLockLost) {
		t.Fatalf("Run whose fn released the lock: %v, want no ErrLockLost", err)
	}
}

// testHoldEndsOnRelease: the Lock's own Release while Hold keeps it ends
// the hold at once (Done closed when it returns, Err matching
// lease.ErrReleased), and Held.Release then releases nothing (ErrNotHeld,
// as a second Release).
func testHoldEndsOnRelease(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	l := mustObtain(t, e.Locker, key, 10*time.Second)
	h, err := lease.Hold(ctx, l, 10*time.Second)
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case <-h.Done():
	default:
		t.Fatal("Done not closed when the Lock's Release returned")
	}
	wantIs(t, "Err", h.Err(), lease.ErrReleased)
	other := mustObtain(t, e.Other, key, 10*time.Second)
	wantIs(t, "Held.Release after the Lock's Release", h.Release(ctx), lease.ErrNotHeld)
	if other.ValidUntil().IsZero() {
		t.Fatal("the next holder's lock is gone")
	}
	if err := other.Refresh(ctx, 10*time.Second); err != nil {
		t.Fatalf("the next holder's Refresh after Held.Release: %v", err)
	}
}
