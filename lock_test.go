package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
)

// A holder whose lease expired cannot refresh, shorten or release the lock of
// the next holder.
func TestStaleHolder(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx := ctxT(t, 10*time.Second)
		old, err := c.Obtain(ctx, "stale", 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		b.elapse(250 * time.Millisecond)
		if _, err := old.TTL(ctx); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("expired TTL = %v, want ErrNotHeld", err)
		}
		cur, err := c.Obtain(ctx, "stale", 10*time.Second)
		if err != nil {
			t.Fatalf("Obtain after expiry: %v", err)
		}
		if cur.Fence() <= old.Fence() {
			t.Fatalf("fence %d not above the expired grant's %d", cur.Fence(), old.Fence())
		}
		// (A TTL whose validity fits a round trip on a loaded machine: a
		// call is bounded by its validity.)
		if err := old.Refresh(ctx, time.Second); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("stale Refresh = %v", err)
		}
		if err := old.Release(ctx); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("stale Release = %v", err)
		}
		ttl, err := cur.TTL(ctx)
		if err != nil || ttl < 9*time.Second {
			t.Fatalf("new holder's lock touched: TTL %v, %v", ttl, err)
		}
		if err := cur.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A stale holder, whose lease ended and whose key a newer grant took, reads
// no TTL, extends nothing and releases nothing: the newer lease is
// untouched.
func TestStaleHolderAfterNewerGrant(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t, 10*time.Second)
		c := newClient(t, b.rdb)
		stale, err := c.Obtain(ctx, "stale", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// Its lease ends (as if expired: the key is gone), and a newer
		// grant, with a much longer lease, takes the key.
		b.rdb.Del(ctx, redislock.DefaultPrefix+"{stale}")
		fresh, err := c.Obtain(ctx, "stale", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := stale.TTL(ctx); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("stale holder's TTL = %v, %v, want ErrNotHeld (not the newer lease)", d, err)
		}
		if err := stale.Refresh(ctx, time.Minute); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("stale holder's Refresh = %v, want ErrNotHeld", err)
		}
		if err := stale.Release(ctx); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("stale holder's Release = %v, want ErrNotHeld", err)
		}
		if d, err := fresh.TTL(ctx); err != nil || d <= 10*time.Second {
			t.Fatalf("newer holder's TTL = %v, %v, want its hour", d, err)
		}
		// And once the newer grant is released, the stale one still
		// reads nothing from the released record.
		if err := fresh.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if d, err := stale.TTL(ctx); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("stale holder's TTL after the release = %v, %v, want ErrNotHeld", d, err)
		}
	})
}

// Release works after the caller's ctx was cancelled.
func TestReleaseAfterCancel(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx, cancel := context.WithCancel(context.Background())
		l, err := c.Obtain(ctx, "cancel", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release on cancelled ctx: %v", err)
		}
		if held(context.Background(), b.rdb, redislock.DefaultPrefix+"{cancel}") {
			t.Fatal("lock key still there")
		}
	})
}

func TestNilLock(t *testing.T) {
	t.Parallel()
	var l *redislock.Lock
	ctx := context.Background()
	if err := l.Release(ctx); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatal(err)
	}
	if err := l.Refresh(ctx, time.Second); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatal(err)
	}
	if _, err := l.TTL(ctx); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatal(err)
	}
	if l.Key() != "" || l.Token() != "" || l.Fence() != 0 || !l.ValidUntil().IsZero() {
		t.Fatal("nil lock accessors not zero")
	}
}
