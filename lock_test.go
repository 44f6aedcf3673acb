package redislock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// After Release returned nil, ValidUntil is zero, whatever ran on the Lock
// at the same time: here a Refresh whose script had extended the lease
// before the Release, and that records its validity only after the
// Release returned. (So does a MultiLock.)
func TestReleaseRacingRefresh(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t, 10*time.Second)
		hook := &pauseHook{}
		rdb := redis.NewClient(b.rdb.Options())
		t.Cleanup(func() { _ = rdb.Close() })
		rdb.AddHook(hook)
		c := newClient(t, rdb)
		race := func(refresh, release func() error, validUntil func() time.Time) {
			t.Helper()
			answered, released := make(chan struct{}), make(chan struct{})
			hook.arm(func() {
				close(answered)
				<-released
			})
			done := make(chan error, 1)
			go func() { done <- refresh() }()
			<-answered // Redis extended the lease; the Refresh waits
			require.NoError(t, release())
			close(released)
			err := <-done
			assert.True(t, validUntil().IsZero(), "ValidUntil %v after Release returned nil (Refresh: %v)", validUntil(), err)
			assert.ErrorIs(t, err, redislock.ErrNotHeld, "a Refresh that ended after the Release")
		}
		l, err := c.Obtain(ctx, "race", 10*time.Second)
		require.NoError(t, err)
		race(func() error { return l.Refresh(ctx, 20*time.Second) }, func() error { return l.Release(ctx) }, l.ValidUntil)
		m, err := c.ObtainMulti(ctx, []string{"race-a", "race-b"}, 10*time.Second)
		require.NoError(t, err)
		race(func() error { return m.Refresh(ctx, 20*time.Second) }, func() error { return m.Release(ctx) }, m.ValidUntil)
	})
}

// pauseHook is a go-redis hook that, once armed, runs after on the
// goroutine of the next script call (EVAL, EVALSHA) that Redis answered
// without error, before the call returns.
type pauseHook struct {
	mu    sync.Mutex
	after func()
}

func (h *pauseHook) arm(after func()) {
	h.mu.Lock()
	h.after = after
	h.mu.Unlock()
}

func (h *pauseHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pauseHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := strings.ToLower(cmd.Name()); err != nil || name != "evalsha" && name != "eval" {
			return err
		}
		h.mu.Lock()
		after := h.after
		h.after = nil
		h.mu.Unlock()
		if after != nil {
			after()
		}
		return err
	}
}

func (h *pauseHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
