// The core contract (DESIGN.md): Obtain grants a key to one holder at a
// time, Refresh, TTL and Release act only for the current holder, every
// grant's fence is above the last one, and Run reports a lost lock. The
// features around it (waiting, handoff, quorum, topologies) have files
// of their own.

package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/testkit"
)

// One grant's life: Obtain, a contender refused, TTL, Refresh, Release,
// and then nothing more for it; the next grant has a new token and a
// higher fence.
func TestObtainReleaseCycle(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx := testkit.Context(t)
		start := time.Now()
		l, err := c.Obtain(ctx, "cycle", time.Second)
		require.NoError(t, err)
		end := time.Now()
		require.Equal(t, "cycle", l.Key())
		require.GreaterOrEqual(t, len(l.Token()), 22, "token %q", l.Token())
		require.Greater(t, l.Fence(), int64(0), "fence")
		// ValidUntil = request start + TTL - (TTL*0.01 + 2ms).
		v := l.ValidUntil()
		require.False(t, v.Before(start.Add(988*time.Millisecond)), "ValidUntil %v not start+TTL-drift (start %v, end %v)", v, start, end)
		require.False(t, v.After(end.Add(988*time.Millisecond)), "ValidUntil %v not start+TTL-drift (start %v, end %v)", v, start, end)
		_, err = c.Obtain(ctx, "cycle", time.Second)
		require.ErrorIs(t, err, redislock.ErrNotObtained, "second Obtain, want ErrNotObtained")
		ttl, err := l.TTL(ctx)
		require.NoError(t, err, "TTL")
		require.Greater(t, ttl, time.Duration(0), "TTL")
		require.LessOrEqual(t, ttl, time.Second, "TTL")
		require.NoError(t, l.Refresh(ctx, 5*time.Second))
		ttl, err = l.TTL(ctx)
		require.NoError(t, err, "TTL after Refresh")
		require.Greater(t, ttl, time.Second, "TTL after Refresh")
		require.NoError(t, l.Release(ctx))
		require.True(t, l.ValidUntil().IsZero(), "ValidUntil not reset after Release")
		require.ErrorIs(t, l.Release(ctx), redislock.ErrNotHeld, "second Release, want ErrNotHeld")
		_, err = l.TTL(ctx)
		require.ErrorIs(t, err, redislock.ErrNotHeld, "TTL after Release")
		require.ErrorIs(t, l.Refresh(ctx, time.Second), redislock.ErrNotHeld, "Refresh after Release")
		l2, err := c.Obtain(ctx, "cycle", time.Second)
		require.NoError(t, err)
		defer l2.Release(ctx)
		require.NotEqual(t, l.Token(), l2.Token(), "second grant's token")
		require.Greater(t, l2.Fence(), l.Fence(), "second grant's fence")
	})
}

// 16 goroutines take the lock in turn, and the grants' fences increase
// in grant order (exclusion).
func TestMutualExclusion(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb, redislock.WithRetry(redislock.LinearBackoff(time.Millisecond)))
		rounds := 15
		if b.real == nil {
			rounds = 3 // miniredis serialises everything: keep it short
		}
		exclusion(t, 16, rounds, func(ctx context.Context, _ int) (int64, func() error, error) {
			l, err := c.Obtain(ctx, "mutex", 5*time.Second, redislock.WithMaxWait(30*time.Second))
			return obtained(ctx, l, err)
		})
	})
}

// A holder whose lease expired cannot refresh, shorten or release the lock of
// the next holder.
func TestStaleHolder(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx := testkit.Context(t)
		// A lease that ends soon on a real server; on miniredis, whose
		// clock the test moves, one that no load outlasts (a call is
		// bounded by its validity, and miniredis is slow under -race).
		lease := 200 * time.Millisecond
		if b.real == nil {
			lease = time.Minute
		}
		// Connected, scripts loaded: the short lease's Obtain is one
		// round trip.
		warm, err := c.Obtain(ctx, "warm", time.Minute)
		require.NoError(t, err)
		require.NoError(t, warm.Release(ctx))
		old, err := c.Obtain(ctx, "stale", lease)
		if b.real != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redislock.ErrGrantExpired)) {
			// The call is bounded by the lease's validity.
			t.Skip("the machine took 200 ms for one round trip: no lease of 200 ms can be granted")
		}
		require.NoError(t, err)
		b.elapse(lease + 50*time.Millisecond)
		_, err = old.TTL(ctx)
		require.ErrorIs(t, err, redislock.ErrNotHeld, "expired TTL, want ErrNotHeld")
		cur, err := c.Obtain(ctx, "stale", 10*time.Second)
		require.NoError(t, err, "Obtain after expiry")
		require.Greater(t, cur.Fence(), old.Fence(), "fence not above the expired grant's %d", old.Fence())
		// (A TTL whose validity fits a round trip on a loaded machine: a
		// call is bounded by its validity.)
		require.ErrorIs(t, old.Refresh(ctx, time.Second), redislock.ErrNotHeld, "stale Refresh")
		require.ErrorIs(t, old.Release(ctx), redislock.ErrNotHeld, "stale Release")
		ttl, err := cur.TTL(ctx)
		require.NoError(t, err, "new holder's TTL")
		require.GreaterOrEqual(t, ttl, 9*time.Second, "new holder's lock touched")
		require.NoError(t, cur.Release(ctx))
	})
}

// A stale holder, whose lease ended and whose key a newer grant took, reads
// no TTL, extends nothing and releases nothing: the newer lease is
// untouched.
func TestStaleHolderAfterNewerGrant(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := testkit.Context(t)
		c := newClient(t, b.rdb)
		stale, err := c.Obtain(ctx, "stale", 10*time.Second)
		require.NoError(t, err)
		// Its lease ends (as if expired: the key is gone), and a newer
		// grant, with a much longer lease, takes the key.
		b.rdb.Del(ctx, redislock.DefaultPrefix+"{stale}")
		fresh, err := c.Obtain(ctx, "stale", time.Hour)
		require.NoError(t, err)
		if d, err := stale.TTL(ctx); !errors.Is(err, redislock.ErrNotHeld) {
			require.Fail(t, fmt.Sprintf("stale holder's TTL = %v, %v, want ErrNotHeld (not the newer lease)", d, err))
		}
		require.ErrorIs(t, stale.Refresh(ctx, time.Minute), redislock.ErrNotHeld, "stale holder's Refresh, want ErrNotHeld")
		require.ErrorIs(t, stale.Release(ctx), redislock.ErrNotHeld, "stale holder's Release, want ErrNotHeld")
		if d, err := fresh.TTL(ctx); err != nil || d <= 10*time.Second {
			require.Fail(t, fmt.Sprintf("newer holder's TTL = %v, %v, want its hour", d, err))
		}
		// And once the newer grant is released, the stale one still
		// reads nothing from the released record.
		require.NoError(t, fresh.Release(ctx))
		d, err := stale.TTL(ctx)
		require.ErrorIs(t, err, redislock.ErrNotHeld, "stale holder's TTL after the release = %v, want ErrNotHeld", d)
	})
}

// Release works after the caller's ctx was cancelled.
func TestReleaseAfterCancel(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx, cancel := context.WithCancel(context.Background())
		l, err := c.Obtain(ctx, "cancel", 10*time.Second)
		require.NoError(t, err)
		cancel()
		require.NoError(t, l.Release(ctx), "Release on cancelled ctx")
		require.False(t, held(context.Background(), b.rdb, redislock.DefaultPrefix+"{cancel}"), "lock key still there")
	})
}

// A nil *Lock is not held, and its accessors are zero.
func TestNilLock(t *testing.T) {
	t.Parallel()
	var l *redislock.Lock
	ctx := context.Background()
	require.ErrorIs(t, l.Release(ctx), redislock.ErrNotHeld)
	require.ErrorIs(t, l.Refresh(ctx, time.Second), redislock.ErrNotHeld)
	_, err := l.TTL(ctx)
	require.ErrorIs(t, err, redislock.ErrNotHeld)
	require.Equal(t, "", l.Key(), "nil lock accessors not zero")
	require.Equal(t, "", l.Token(), "nil lock accessors not zero")
	require.Equal(t, int64(0), l.Fence(), "nil lock accessors not zero")
	require.True(t, l.ValidUntil().IsZero(), "nil lock accessors not zero")
}

// After Release returned nil, ValidUntil is zero, whatever ran on the Lock
// at the same time: here a Refresh whose script had extended the lease
// before the Release, and that records its validity only after the
// Release returned. (So does a MultiLock.)
func TestReleaseRacingRefresh(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := testkit.Context(t)
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

// Grants by different Clients on one key get increasing fences.
func TestFencesIncreaseAcrossClients(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		clients := []*redislock.Client{newClient(t, b.rdb), newClient(t, b.rdb), newClient(t, b.rdb)}
		ctx := testkit.Context(t)
		var last int64
		for i := range 60 {
			l, err := clients[i%3].Obtain(ctx, "fences", time.Second)
			require.NoError(t, err)
			require.Greater(t, l.Fence(), last, "grant %d: fence after %d", i, last)
			last = l.Fence()
			if i%2 == 0 {
				require.NoError(t, l.Release(ctx))
			} else { // the key vanishes without a release (expiry, eviction)
				b.rdb.Del(ctx, redislock.DefaultPrefix+"{fences}")
			}
		}
	})
}

// A renewal that finds the lock taken cancels fn at once.
func TestRunDetectsStolenLock(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
		defer cancel()
		fnErr := errors.New("fn failed")
		// A lease far longer than the renewal interval: only a renewal's
		// finding can end it, however loaded the machine.
		err := c.Run(ctx, "stolen", 30*time.Second, func(fnCtx context.Context, l *redislock.Lock) error {
			validUntil := l.ValidUntil()
			// Someone deletes the lock and takes it (an operator, a bug).
			// On the test's ctx, not fn's: a renewal between the two calls
			// already cancels fn's.
			b.rdb.Del(ctx, redislock.DefaultPrefix+"{stolen}")
			if _, err := c.Obtain(ctx, "stolen", 10*time.Second); err != nil {
				return err
			}
			select {
			case <-fnCtx.Done():
				assert.ErrorIs(t, context.Cause(fnCtx), redislock.ErrLockLost, "cause")
				assert.False(t, time.Now().After(validUntil), "loss noticed only after the validity ended")
				assert.True(t, l.ValidUntil().IsZero(), "ValidUntil still set after the loss")
				return fnErr
			case <-ctx.Done():
				return errors.New("fn's ctx not cancelled")
			}
		}, redislock.WithRefreshInterval(20*time.Millisecond))
		require.ErrorIs(t, err, redislock.ErrLockLost, "Run, want ErrLockLost and fn's error")
		require.ErrorIs(t, err, fnErr, "Run, want ErrLockLost and fn's error")
		require.True(t, held(ctx, b.rdb, redislock.DefaultPrefix+"{stolen}"), "Run released the new holder's lock")
	})
}

// Redis killed while fn runs: fn's ctx is cancelled at ValidUntil, and Run
// returns ErrLockLost once fn returns, without waiting for a release on the
// dead server (that goes to the background; Close waits for it).
func TestRunReturnsWhenLockLost(t *testing.T) {
	t.Parallel()
	srv, rdb, w, slow := deadServer(t)
	c := redislock.New(rdb, redislock.WithReleaseTimeout(patience))
	t.Cleanup(func() {
		w.release()
		_ = c.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*patience)
	defer cancel()
	err := c.Run(ctx, "dead", 500*time.Millisecond, func(ctx context.Context, l *redislock.Lock) error {
		srv.Kill()
		<-ctx.Done() // at ValidUntil at the latest
		slow()
		return nil
	})
	require.ErrorIs(t, err, redislock.ErrLockLost, "Run, want ErrLockLost")
	require.False(t, w.fired.Load(), "Run waited for a release on the dead server")
}
