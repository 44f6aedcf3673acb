package redislock_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// renewLog is an Observer that records, per key, the renewals and losses
// of held locks.
type renewLog struct {
	mu      sync.Mutex
	renewed map[string]int
	lost    map[string]error
}

func newRenewLog() *renewLog { return &renewLog{renewed: map[string]int{}, lost: map[string]error{}} }

func (r *renewLog) RefreshStart(ctx context.Context, e observe.RefreshStartEvent) context.Context {
	return ctx
}

func (r *renewLog) RefreshDone(_ context.Context, e observe.RefreshDoneEvent) {
	if e.Renewal && e.Err == nil {
		r.mu.Lock()
		r.renewed[e.Key]++
		r.mu.Unlock()
	}
}

func (r *renewLog) LockLost(_ context.Context, e observe.LossEvent) {
	r.mu.Lock()
	r.lost[e.Key] = e.Cause
	r.mu.Unlock()
}

// renewedAll reports whether each of keys was renewed at least once.
func (r *renewLog) renewedAll(keys []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if r.renewed[k] == 0 {
			return false
		}
	}
	return true
}

// batchCalls is a go-redis hook that counts batch_refresh.lua calls and
// the keys they carry.
type batchCalls struct {
	calls, keys atomic.Int64
	most        atomic.Int64 // the most keys of one call
	pipelines   atomic.Int64 // pipelines with a batch_refresh.lua call
}

func (b *batchCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (b *batchCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		b.count(cmd)
		return next(ctx, cmd)
	}
}

func (b *batchCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		before := b.calls.Load()
		for _, cmd := range cmds {
			b.count(cmd)
		}
		if b.calls.Load() > before {
			b.pipelines.Add(1)
		}
		return next(ctx, cmds)
	}
}

func (b *batchCalls) count(cmd redis.Cmder) {
	n, ok := script.BatchRefreshKeys(cmd)
	if !ok {
		return
	}
	b.calls.Add(1)
	b.keys.Add(int64(n))
	for m := b.most.Load(); int64(n) > m && !b.most.CompareAndSwap(m, int64(n)); m = b.most.Load() {
	}
}

// holdMany obtains and holds (lease.Hold) n locks on prefix-0, prefix-1...
func holdMany(t *testing.T, ctx context.Context, c *redislock.Client, prefix string, n int, ttl time.Duration) (keys []string, held []*lease.Held) {
	t.Helper()
	for i := range n {
		key := fmt.Sprintf("%s-%d", prefix, i)
		l, err := c.Obtain(ctx, key, ttl)
		require.NoError(t, err)
		h, err := lease.Hold(ctx, l, ttl)
		require.NoError(t, err)
		keys, held = append(keys, key), append(held, h)
	}
	return keys, held
}

// The held locks of a Client share its renewer: many locks, few
// goroutines, several locks per batch_refresh.lua call; each lock is
// renewed and Release takes it out.
func TestKeepBatches(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	calls := &batchCalls{}
	rdb.AddHook(calls)
	rec := newRenewLog()
	c := newClient(t, rdb, redislock.WithObserver(rec))
	ctx := testkit.Context(t)
	const n = 200
	const ttl = 1500 * time.Millisecond
	before := runtime.NumGoroutine()
	keys, held := holdMany(t, ctx, c, "batch", n, ttl)
	assert.LessOrEqual(t, runtime.NumGoroutine()-before, 10, "more goroutines for %d held locks", n)
	require.Equal(t, n, redislock.Renewing(c), "renewer has locks, want %d", n)
	require.Eventually(t, func() bool { return rec.renewedAll(keys) }, 10*time.Second, 5*time.Millisecond, "every lock renewed")
	assert.False(t, calls.most.Load() < 2 || calls.calls.Load() >= calls.keys.Load(), "%d calls for %d renewals (at most %d in one): not batched", calls.calls.Load(), calls.keys.Load(), calls.most.Load())
	for i, h := range held {
		require.NoError(t, h.Err(), "lock %d", i)
	}
	// Released one way or the other, a lock leaves the renewer.
	require.NoError(t, held[0].Lock().Release(ctx))
	require.Equal(t, n-1, redislock.Renewing(c), "after a Release the renewer has locks, want %d", n-1)
	for _, h := range held[1:] {
		require.NoError(t, h.Release(ctx))
	}
	require.Equal(t, 0, redislock.Renewing(c), "after the releases the renewer has locks")
	require.ErrorIs(t, held[0].Release(ctx), redislock.ErrNotHeld, "Held.Release after Lock.Release, want ErrNotHeld")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, 0, len(rec.lost), "losses reported for released locks: %v", rec.lost)
}

// A lock deleted behind its holder's back is reported lost to that holder
// alone, before its ValidUntil; the others stay held.
func TestKeepLossReachesItsHolder(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		rec := newRenewLog()
		c := newClient(t, b.rdb, redislock.WithObserver(rec))
		ctx := testkit.Context(t)
		const ttl = time.Second
		_, held := holdMany(t, ctx, c, "loss", 3, ttl)
		for _, h := range held {
			defer h.Release(ctx)
		}
		victim := held[1]
		watch := watchLoss(victim.Context(), victim.Lock())
		until := victim.Lock().ValidUntil()
		require.NoError(t, b.rdb.Del(ctx, redislock.LockKey("loss-1")).Err())
		watch.before(t, until, redislock.ErrNotHeld)
		require.ErrorIs(t, victim.Err(), redislock.ErrLockLost, "victim: Err, ValidUntil %v", victim.Lock().ValidUntil())
		require.True(t, victim.Lock().ValidUntil().IsZero(), "victim: Err %v, ValidUntil %v", victim.Err(), victim.Lock().ValidUntil())
		for _, i := range []int{0, 2} {
			renewedAfter(t, held[i].Lock(), until, 5*time.Second)
			require.NoError(t, held[i].Err(), "lock %d", i)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		require.Equal(t, 1, len(rec.lost), "LossEvents %v, want loss-1's only", rec.lost)
		require.ErrorIs(t, rec.lost["loss-1"], redislock.ErrNotHeld, "LossEvents %v, want loss-1's only", rec.lost)
	})
}

// An explicit Refresh by the holder works while the renewer keeps the lock
// and moves its validity; a stolen lock's Refresh is ErrNotHeld.
func TestKeepExplicitRefresh(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	ctx := testkit.Context(t)
	err := c.Run(ctx, "explicit", time.Second, func(ctx context.Context, l *redislock.Lock) error {
		before := l.ValidUntil()
		if err := l.Refresh(ctx, 3*time.Second); err != nil {
			return err
		}
		assert.True(t, l.ValidUntil().After(before.Add(time.Second)), "ValidUntil %v after a 3 s Refresh (was %v)", l.ValidUntil(), before)
		assert.Greater(t, rdb.PTTL(ctx, redislock.LockKey("explicit")).Val(), time.Second, "PTTL after a 3 s Refresh")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 0, redislock.Renewing(c), "Run left its lock in the renewer")
}

// Close ends the renewals and tells each kept lock's holder at once; the
// lock can still be released.
func TestCloseReportsKeptLocks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := redislock.New(rdb)
	ctx := testkit.Context(t)
	l, err := c.Obtain(ctx, "closing", 10*time.Second)
	require.NoError(t, err)
	late, err := c.Obtain(ctx, "held-after-close", time.Second)
	require.NoError(t, err)
	h, err := lease.Hold(ctx, l, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	select {
	case <-h.Done():
	default:
		require.Fail(t, "Close returned before the holder was told")
	}
	require.ErrorIs(t, h.Err(), redislock.ErrLockLost, "Err after Close, want ErrLockLost")
	require.NoError(t, h.Release(ctx), "Release after Close")
	require.False(t, held(ctx, rdb, redislock.LockKey("closing")), "lock not released")
	// After Close, a lock obtained before is held with a refresher of its
	// own.
	h2, err := lease.Hold(ctx, late, time.Second)
	require.NoError(t, err)
	renewedAfter(t, late, late.ValidUntil(), 5*time.Second)
	require.NoError(t, h2.Release(ctx))
}
