package redislock_test

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Fences keep increasing when the server restarts without persistence and
// when its data is flushed.
func TestFencesSurviveDataLoss(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	ctx := testkit.Context(t)
	obtain := func() int64 {
		t.Helper()
		l, err := c.Obtain(ctx, "durable", time.Second)
		require.NoError(t, err)
		_ = l.Release(ctx)
		return l.Fence()
	}
	f1 := obtain()
	f2 := obtain()
	srv.Restart()           // returns once the server answers
	rdb2 := srv.Client(nil) // connections of its own: none from before the restart
	c = newClient(t, rdb2)
	n, _ := rdb2.DBSize(ctx).Result()
	require.Equal(t, int64(0), n, "restart kept keys")
	f3 := obtain()
	rdb2.FlushAll(ctx)
	f4 := obtain()
	require.True(t, f1 < f2 && f2 < f3 && f3 < f4, "fences not increasing across data loss: %d %d %d %d", f1, f2, f3, f4)
}

func TestFencedSet(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := testkit.Context(t)
		require.NoError(t, redislock.FencedSet(ctx, b.rdb, "res", "a", 10, 0))
		require.NoError(t, redislock.FencedSet(ctx, b.rdb, "res", "b", 10, 0), "same fence rejected")
		require.ErrorIs(t, redislock.FencedSet(ctx, b.rdb, "res", "stale", 9, 0), redislock.ErrStaleFence, "stale write")
		require.NoError(t, redislock.FencedSet(ctx, b.rdb, "res", "c", 11, time.Minute))
		v, f, err := redislock.FencedGet(ctx, b.rdb, "res")
		require.NoError(t, err, "FencedGet = %q %d", v, f)
		require.Equal(t, "c", v, "FencedGet %d %v", f, err)
		require.Equal(t, int64(11), f, "FencedGet = %q %v", v, err)
		_, _, err = redislock.FencedGet(ctx, b.rdb, "nothing")
		require.ErrorIs(t, err, redis.Nil, "missing")
	})
	var g redislock.FenceGate
	for _, f := range []int64{5, 5, 7} { // the same fence twice, then a newer one
		require.NoError(t, g.Admit(f), "gate rejected fence %d", f)
	}
	require.ErrorIs(t, g.Admit(6), redislock.ErrStaleFence, "gate admitted a stale fence")
	wrote := false
	err := g.Do(6, func() error { wrote = true; return nil })
	require.Error(t, err, "gate ran a stale write")
	require.False(t, wrote, "gate ran a stale write")
}

// Fences are compared exactly over the whole int64 range, above 2^53 too
// (Lua numbers are doubles): fences minted elsewhere, from nanosecond
// clocks or database sequences, are ordered as integers.
func TestFencesExactAboveDoubles(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	ctx := testkit.Context(t)
	pairs := [][2]int64{
		{9007199254740993, 9007199254740992}, // 2^53+1, then 2^53
		{1800000000000000100, 1800000000000000001},
		{math.MaxInt64, math.MaxInt64 - 1},
	}
	for i, p := range pairs {
		key := "exact-" + strconv.Itoa(i)
		require.NoError(t, redislock.FencedSet(ctx, rdb, key, "new", p[0], 0), "FencedSet(%d)", p[0])
		err := redislock.FencedSet(ctx, rdb, key, "old", p[1], 0)
		assert.False(t, !errors.Is(err, redislock.ErrStaleFence) || !strings.Contains(err.Error(), strconv.FormatInt(p[0], 10)), "FencedSet(%d) after %d = %v, want ErrStaleFence naming %d", p[1], p[0], err, p[0])
		if _, f, err := redislock.FencedGet(ctx, rdb, key); err != nil || f != p[0] {
			assert.Fail(t, fmt.Sprintf("FencedGet after %d = %d, %v", p[0], f, err))
		}
		s := c.Store()
		require.NoError(t, s.Put(ctx, key, []byte("new"), p[0], 0), "Store.Put(%d)", p[0])
		assert.ErrorIs(t, s.Put(ctx, key, []byte("old"), p[1], 0), redislock.ErrStaleFence, "Store.Put(%d) after %d, want ErrStaleFence", p[1], p[0])
		if r, err := s.Get(ctx, key); err != nil || r.Fence != p[0] || string(r.Value) != "new" {
			assert.Fail(t, fmt.Sprintf("Store.Get after %d = %+v, %v", p[0], r, err))
		}
		assert.ErrorIs(t, s.Delete(ctx, key, p[1]), redislock.ErrStaleFence, "Store.Delete(%d) after %d, want ErrStaleFence", p[1], p[0])
	}
}

// A fence <= 0 is no grant's: every fence check refuses it as invalid.
func TestFenceNotPositiveInvalid(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	ctx := testkit.Context(t)
	var g redislock.FenceGate
	for _, f := range []int64{0, -1, math.MinInt64} {
		for what, err := range map[string]error{
			"FencedSet":    redislock.FencedSet(ctx, rdb, "np", "v", f, 0),
			"Store.Put":    c.Store().Put(ctx, "np", []byte("v"), f, 0),
			"Store.Delete": c.Store().Delete(ctx, "np", f),
			"FenceGate":    g.Admit(f),
		} {
			assert.ErrorIs(t, err, redislock.ErrInvalidArgument, "%s(%d), want ErrInvalidArgument", what, f)
		}
	}
}

// The lock scripts mint fences exactly over the whole int64 range: a key
// whose last fence is above 2^53 (a Lua number, a double, is exact only up
// to there) gets the next integer from Obtain, a fair Obtain, ObtainMulti,
// a handoff and a quorum's proposals, and a key at 2^63-1 has no fence
// left: an error, no grant.
func TestLockFencesExactAboveDoubles(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	ctx := testkit.Context(t)
	released := func(t *testing.T, rdb redis.Cmdable, key string, fence int64) {
		t.Helper()
		v := "~:" + strconv.FormatInt(fence, 10) + ": 0123456789ab"
		require.NoError(t, rdb.Set(ctx, redislock.LockKey(key), v, time.Minute).Err())
	}
	const above = 1<<53 + 1
	for _, last := range []int64{above, 1e18 - 1, 1800000000000000100, math.MaxInt64 - 2} { // 1e18-1: a carry through every digit
		t.Run(strconv.FormatInt(last, 10), func(t *testing.T) {
			ws := newWaitStarts()
			c := newClient(t, rdb, redislock.WithObserver(ws))
			key := "lf-" + strconv.FormatInt(last, 10)
			released(t, rdb, key, last)
			l, err := c.Obtain(ctx, key, time.Minute)
			require.NoError(t, err, "Obtain after %d: fence %d; want %d", last, l.Fence(), last+1)
			require.Equal(t, last+1, l.Fence(), "Obtain after %d: fence, %v; want %d", last, err, last+1)
			require.Contains(t, rdb.Get(ctx, redislock.LockKey(key)).Val(), ":"+strconv.FormatInt(last+1, 10)+":", "lock key, want fence %d", last+1)
			// A handoff to a waiting caller of the same Client: the next fence.
			got := make(chan *redislock.Lock, 1)
			go func() {
				l, err := c.Obtain(ctx, key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(time.Minute)))
				assert.NoError(t, err)
				got <- l
			}()
			testkit.Recv(t, ws.ch, "WaitStart")
			// WaitStart comes before the waiter queues with the Client: a
			// Release before that finds no one to hand the lock to.
			require.Eventually(t, func() bool {
				n, ready := redislock.LocalWaiters(c, key)
				return n == 1 && ready
			}, 10*time.Second, 5*time.Millisecond, "the waiter queued")
			require.NoError(t, l.Release(ctx))
			h := testkit.Recv(t, got, "the handed lock")
			require.NotNil(t, h, "handed over after %d, want fence %d by a handoff", last+1, last+2)
			require.Equal(t, last+2, h.Fence(), "handed over after %d: %v, want fence %d by a handoff", last+1, h, last+2)
			require.Equal(t, 1, redislock.Handoffs(h), "handed over after %d: %v, want fence %d by a handoff", last+1, h, last+2)
			require.NoError(t, h.Release(ctx))
			// The key's last fence is now last+2: fair and multi-key obtains
			// go on from it.
			if last+2 == math.MaxInt64 {
				for name, obtain := range map[string]func() error{
					"Obtain": func() error { _, err := c.Obtain(ctx, key, time.Minute); return err },
					"fair":   func() error { _, err := c.Obtain(ctx, key, time.Minute, redislock.WithFair(true)); return err },
					"multi":  func() error { _, err := c.ObtainMulti(ctx, []string{key}, time.Minute); return err },
				} {
					err := obtain()
					assert.False(t, err == nil || errors.Is(err, redislock.ErrNotObtained) || !strings.Contains(err.Error(), "no fence is left"), "%s after fence MaxInt64: %v, want the error that no fence is left", name, err)
				}
				return
			}
			f, err := c.Obtain(ctx, key, time.Minute, redislock.WithFair(true))
			require.NoError(t, err, "fair Obtain after %d: fence %d; want %d", last+2, f.Fence(), last+3)
			require.Equal(t, last+3, f.Fence(), "fair Obtain after %d: fence, %v; want %d", last+2, err, last+3)
			require.NoError(t, f.Release(ctx))
			other := key + "-other"
			released(t, rdb, other, last)
			m, err := c.ObtainMulti(ctx, []string{key, other}, time.Minute)
			require.NoError(t, err, "ObtainMulti after %d and %d: fences %d, %d", last+3, last, m.Fence(key), m.Fence(other))
			require.Equal(t, last+4, m.Fence(key), "ObtainMulti after %d and %d: fences, %d, %v", last+3, last, m.Fence(other), err)
			require.Equal(t, last+1, m.Fence(other), "ObtainMulti after %d and %d: fences %d, %v", last+3, last, m.Fence(key), err)
			require.NoError(t, m.Release(ctx))
		})
	}
}

// A quorum's proposals are compared exactly above 2^53: nodes whose last
// fence is F refuse a proposal of F (not above it) and grant F+1; nodes at
// 2^63-1 have no fence left, and Obtain says so.
func TestQuorumFencesExactAboveDoubles(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	ctx := testkit.Context(t)
	for _, last := range []int64{1<<53 + 1, math.MaxInt64 - 1, math.MaxInt64} {
		key := "qf-" + strconv.FormatInt(last, 10)
		for _, rdb := range q.rdbs {
			v := "~:" + strconv.FormatInt(last, 10) + ": 0123456789ab"
			require.NoError(t, rdb.Set(ctx, redislock.LockKey(key), v, time.Minute).Err())
		}
		c := q.client(t)
		l, err := c.Obtain(ctx, key, time.Minute)
		if last == math.MaxInt64 {
			assert.False(t, err == nil || errors.Is(err, redislock.ErrNotObtained) || !strings.Contains(err.Error(), "no fence is left"), "quorum Obtain after fence MaxInt64: %v, want the error that no fence is left", err)
			continue
		}
		require.NoError(t, err, "quorum Obtain after %d: fence %d; want %d", last, l.Fence(), last+1)
		require.Equal(t, last+1, l.Fence(), "quorum Obtain after %d: fence, %v; want %d", last, err, last+1)
		require.Eventually(t, func() bool { return q.holders(t, key, l.Token()) == 3 }, 10*time.Second, 5*time.Millisecond, "every node holds the grant")
		require.NoError(t, l.Release(ctx))
	}
}

// Fences increase strictly per key across releases, expiries of the lock
// and of its released record, a handed-over grant, and the loss of all
// data (FLUSHALL): the next fence comes from the record, or from the
// server clock when there is none.
func TestFenceIncreasesAcrossLoss(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := testkit.Context(t) // a safety bound only
		// The release timeout only bounds each Release (a safety bound that
		// never decides the test); the expiries below are made by PEXPIRE,
		// so no grant has to be confirmed within a short TTL.
		const rt = 10 * time.Second
		c := newClient(t, b.rdb, redislock.WithReleaseTimeout(rt))
		// expire makes the lock key expire the way Redis expires keys, soon:
		// its TTL is cut to 1 ms, then 2 ms pass (miniredis fast-forwards;
		// a real server is judged by its own clock, set by the PEXPIRE reply).
		expire := func() {
			t.Helper()
			require.NoError(t, b.rdb.PExpire(ctx, redislock.DefaultPrefix+"{f}", time.Millisecond).Err())
			b.elapse(2 * time.Millisecond)
			n, err := b.rdb.Exists(ctx, redislock.DefaultPrefix+"{f}").Result()
			require.NoError(t, err, "the key did not expire: %d", n)
			require.Equal(t, int64(0), n, "the key did not expire, %v", err)
		}
		var last int64
		next := func(how string, ttl time.Duration, opts ...redislock.Option) *redislock.Lock {
			t.Helper()
			l, err := c.Obtain(ctx, "f", ttl, opts...)
			require.NoError(t, err, how)
			require.Greater(t, l.Fence(), last, "fence after %d (%s): fences must increase", last, how)
			last = l.Fence()
			return l
		}
		release := func(l *redislock.Lock) {
			t.Helper()
			require.NoError(t, l.Release(ctx))
		}
		release(next("first", 5*time.Second))
		first := last
		release(next("after a release", 5*time.Second))
		require.Equal(t, first+1, last, "fence after a release of %d, want +1", first)
		release(next("fair, after a release", 5*time.Second, redislock.WithFair(true)))
		next("before an expiry", 5*time.Second)
		expire() // the lock expires
		release(next("after the lock expired", 5*time.Second))
		expire() // the record expires too
		l := next("after the record expired", 5*time.Second)
		require.NoError(t, b.rdb.FlushAll(ctx).Err())
		_ = l.Release(ctx)
		release(next("after FLUSHALL", 5*time.Second))
		b.rdb.FlushAll(ctx)
		m, err := c.ObtainMulti(ctx, []string{"f", "g"}, 5*time.Second)
		require.NoError(t, err)
		require.Greater(t, m.Fence("f"), last, "multi fence after %d", last)
		last = m.Fence("f")
		require.NoError(t, m.Release(ctx))
		release(next("after a multi release", 5*time.Second))
	})
}
