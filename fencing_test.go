package redislock_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

func TestFencesIncreaseAcrossClients(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		clients := []*redislock.Client{newClient(t, b.rdb), newClient(t, b.rdb), newClient(t, b.rdb)}
		ctx := ctxT(t, 10*time.Second)
		var last int64
		for i := range 60 {
			l, err := clients[i%3].Obtain(ctx, "fences", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if l.Fence() <= last {
				t.Fatalf("grant %d: fence %d after %d", i, l.Fence(), last)
			}
			last = l.Fence()
			if i%2 == 0 {
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			} else { // the key vanishes without a release (expiry, eviction)
				b.rdb.Del(ctx, redislock.DefaultPrefix+"{fences}")
			}
		}
	})
}

// Fences increase strictly per key across releases, expiries of the lock
// and of its released record, a handed-over grant, and the loss of all
// data (FLUSHALL): the next fence comes from the record, or from the
// server clock when there is none.
func TestFenceIncreasesAcrossLoss(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t, time.Minute) // a safety bound only
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
			if err := b.rdb.PExpire(ctx, redislock.DefaultPrefix+"{f}", time.Millisecond).Err(); err != nil {
				t.Fatal(err)
			}
			b.elapse(2 * time.Millisecond)
			if n, err := b.rdb.Exists(ctx, redislock.DefaultPrefix+"{f}").Result(); err != nil || n != 0 {
				t.Fatalf("the key did not expire: %d, %v", n, err)
			}
		}
		var last int64
		next := func(how string, ttl time.Duration, opts ...redislock.Option) *redislock.Lock {
			t.Helper()
			l, err := c.Obtain(ctx, "f", ttl, opts...)
			if err != nil {
				t.Fatal(how, err)
			}
			if l.Fence() <= last {
				t.Fatalf("fence %d after %d (%s): fences must increase", l.Fence(), last, how)
			}
			last = l.Fence()
			return l
		}
		release := func(l *redislock.Lock) {
			t.Helper()
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		release(next("first", 5*time.Second))
		first := last
		release(next("after a release", 5*time.Second))
		if last != first+1 {
			t.Fatalf("fence %d after a release of %d, want +1", last, first)
		}
		release(next("fair, after a release", 5*time.Second, redislock.WithFair(true)))
		next("before an expiry", 5*time.Second)
		expire() // the lock expires
		release(next("after the lock expired", 5*time.Second))
		expire() // the record expires too
		l := next("after the record expired", 5*time.Second)
		if err := b.rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
		release(next("after FLUSHALL", 5*time.Second))
		b.rdb.FlushAll(ctx)
		m, err := c.ObtainMulti(ctx, []string{"f", "g"}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Fence("f") <= last {
			t.Fatalf("multi fence %d after %d", m.Fence("f"), last)
		}
		last = m.Fence("f")
		if err := m.Release(ctx); err != nil {
			t.Fatal(err)
		}
		release(next("after a multi release", 5*time.Second))
	})
}

// Fences keep increasing when the server restarts without persistence and
// when its data is flushed.
func TestFencesSurviveDataLoss(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	ctx := ctxT(t, 20*time.Second)
	obtain := func() int64 {
		t.Helper()
		l, err := c.Obtain(ctx, "durable", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
		return l.Fence()
	}
	f1 := obtain()
	f2 := obtain()
	srv.Restart()           // returns once the server answers
	rdb2 := srv.Client(nil) // connections of its own: none from before the restart
	c = newClient(t, rdb2)
	if n, _ := rdb2.DBSize(ctx).Result(); n != 0 {
		t.Fatalf("restart kept %d keys", n)
	}
	f3 := obtain()
	rdb2.FlushAll(ctx)
	f4 := obtain()
	if !(f1 < f2 && f2 < f3 && f3 < f4) {
		t.Fatalf("fences not increasing across data loss: %d %d %d %d", f1, f2, f3, f4)
	}
}

func TestFencedSet(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t, 10*time.Second)
		if err := redislock.FencedSet(ctx, b.rdb, "res", "a", 10, 0); err != nil {
			t.Fatal(err)
		}
		if err := redislock.FencedSet(ctx, b.rdb, "res", "b", 10, 0); err != nil {
			t.Fatal("same fence rejected:", err)
		}
		if err := redislock.FencedSet(ctx, b.rdb, "res", "stale", 9, 0); !errors.Is(err, redislock.ErrStaleFence) {
			t.Fatalf("stale write = %v", err)
		}
		if err := redislock.FencedSet(ctx, b.rdb, "res", "c", 11, time.Minute); err != nil {
			t.Fatal(err)
		}
		v, f, err := redislock.FencedGet(ctx, b.rdb, "res")
		if err != nil || v != "c" || f != 11 {
			t.Fatalf("FencedGet = %q %d %v", v, f, err)
		}
		if _, _, err := redislock.FencedGet(ctx, b.rdb, "nothing"); !errors.Is(err, redis.Nil) {
			t.Fatalf("missing = %v", err)
		}
	})
	var g redislock.FenceGate
	for _, f := range []int64{5, 5, 7} { // the same fence twice, then a newer one
		if err := g.Admit(f); err != nil {
			t.Fatalf("gate rejected fence %d: %v", f, err)
		}
	}
	if err := g.Admit(6); !errors.Is(err, redislock.ErrStaleFence) {
		t.Fatal("gate admitted a stale fence")
	}
	wrote := false
	if err := g.Do(6, func() error { wrote = true; return nil }); err == nil || wrote {
		t.Fatal("gate ran a stale write")
	}
}

// Fences are compared exactly over the whole int64 range, above 2^53 too
// (Lua numbers are doubles): fences minted elsewhere, from nanosecond
// clocks or database sequences, are ordered as integers.
func TestFencesExactAboveDoubles(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	ctx := ctxT(t, 10*time.Second)
	pairs := [][2]int64{
		{9007199254740993, 9007199254740992}, // 2^53+1, then 2^53
		{1800000000000000100, 1800000000000000001},
		{math.MaxInt64, math.MaxInt64 - 1},
	}
	for i, p := range pairs {
		key := "exact-" + strconv.Itoa(i)
		if err := redislock.FencedSet(ctx, rdb, key, "new", p[0], 0); err != nil {
			t.Fatalf("FencedSet(%d): %v", p[0], err)
		}
		err := redislock.FencedSet(ctx, rdb, key, "old", p[1], 0)
		if !errors.Is(err, redislock.ErrStaleFence) || !strings.Contains(err.Error(), strconv.FormatInt(p[0], 10)) {
			t.Errorf("FencedSet(%d) after %d = %v, want ErrStaleFence naming %d", p[1], p[0], err, p[0])
		}
		if _, f, err := redislock.FencedGet(ctx, rdb, key); err != nil || f != p[0] {
			t.Errorf("FencedGet after %d = %d, %v", p[0], f, err)
		}
		s := c.Store()
		if err := s.Put(ctx, key, []byte("new"), p[0], 0); err != nil {
			t.Fatalf("Store.Put(%d): %v", p[0], err)
		}
		if err := s.Put(ctx, key, []byte("old"), p[1], 0); !errors.Is(err, redislock.ErrStaleFence) {
			t.Errorf("Store.Put(%d) after %d = %v, want ErrStaleFence", p[1], p[0], err)
		}
		if r, err := s.Get(ctx, key); err != nil || r.Fence != p[0] || string(r.Value) != "new" {
			t.Errorf("Store.Get after %d = %+v, %v", p[0], r, err)
		}
		if err := s.Delete(ctx, key, p[1]); !errors.Is(err, redislock.ErrStaleFence) {
			t.Errorf("Store.Delete(%d) after %d = %v, want ErrStaleFence", p[1], p[0], err)
		}
	}
}

// A fence <= 0 is no grant's: every fence check refuses it as invalid.
func TestFenceNotPositiveInvalid(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	ctx := ctxT(t, 10*time.Second)
	var g redislock.FenceGate
	for _, f := range []int64{0, -1, math.MinInt64} {
		for what, err := range map[string]error{
			"FencedSet":    redislock.FencedSet(ctx, rdb, "np", "v", f, 0),
			"Store.Put":    c.Store().Put(ctx, "np", []byte("v"), f, 0),
			"Store.Delete": c.Store().Delete(ctx, "np", f),
			"FenceGate":    g.Admit(f),
		} {
			if !errors.Is(err, redislock.ErrInvalidArgument) {
				t.Errorf("%s(%d) = %v, want ErrInvalidArgument", what, f, err)
			}
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
	ctx := ctxT(t, 20*time.Second)
	released := func(t *testing.T, rdb redis.Cmdable, key string, fence int64) {
		t.Helper()
		v := "~:" + strconv.FormatInt(fence, 10) + ": 0123456789ab"
		if err := rdb.Set(ctx, redislock.LockKey(key), v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const above = 1<<53 + 1
	for _, last := range []int64{above, 1e18 - 1, 1800000000000000100, math.MaxInt64 - 2} { // 1e18-1: a carry through every digit
		t.Run(strconv.FormatInt(last, 10), func(t *testing.T) {
			ws := newWaitStarts()
			c := newClient(t, rdb, redislock.WithObserver(ws))
			key := "lf-" + strconv.FormatInt(last, 10)
			released(t, rdb, key, last)
			l, err := c.Obtain(ctx, key, time.Minute)
			if err != nil || l.Fence() != last+1 {
				t.Fatalf("Obtain after %d: fence %d, %v; want %d", last, l.Fence(), err, last+1)
			}
			if v := rdb.Get(ctx, redislock.LockKey(key)).Val(); !strings.Contains(v, ":"+strconv.FormatInt(last+1, 10)+":") {
				t.Fatalf("lock key %q, want fence %d", v, last+1)
			}
			// A handoff to a waiting caller of the same Client: the next fence.
			got := make(chan *redislock.Lock, 1)
			go func() {
				l, err := c.Obtain(ctx, key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(time.Minute)))
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			ws.await(t, 1)
			// Subscribed: the release can hand it the lock (WaitStart
			// comes before the subscription).
			eventually(t, 10*time.Second, "the waiter waits", func() bool { n, ready := redislock.LocalWaiters(c, key); return n == 1 && ready })
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			h := <-got
			if h == nil || h.Fence() != last+2 || redislock.Handoffs(h) != 1 {
				t.Fatalf("handed over after %d: %v, want fence %d by a handoff", last+1, h, last+2)
			}
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// The key's last fence is now last+2: fair and multi-key obtains
			// go on from it.
			if last+2 == math.MaxInt64 {
				for name, obtain := range map[string]func() error{
					"Obtain": func() error { _, err := c.Obtain(ctx, key, time.Minute); return err },
					"fair":   func() error { _, err := c.Obtain(ctx, key, time.Minute, redislock.WithFair(true)); return err },
					"multi":  func() error { _, err := c.ObtainMulti(ctx, []string{key}, time.Minute); return err },
				} {
					if err := obtain(); err == nil || errors.Is(err, redislock.ErrNotObtained) || !strings.Contains(err.Error(), "no fence is left") {
						t.Errorf("%s after fence MaxInt64: %v, want the error that no fence is left", name, err)
					}
				}
				return
			}
			f, err := c.Obtain(ctx, key, time.Minute, redislock.WithFair(true))
			if err != nil || f.Fence() != last+3 {
				t.Fatalf("fair Obtain after %d: fence %d, %v; want %d", last+2, f.Fence(), err, last+3)
			}
			if err := f.Release(ctx); err != nil {
				t.Fatal(err)
			}
			other := key + "-other"
			released(t, rdb, other, last)
			m, err := c.ObtainMulti(ctx, []string{key, other}, time.Minute)
			if err != nil || m.Fence(key) != last+4 || m.Fence(other) != last+1 {
				t.Fatalf("ObtainMulti after %d and %d: fences %d, %d, %v", last+3, last, m.Fence(key), m.Fence(other), err)
			}
			if err := m.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A quorum's proposals are compared exactly above 2^53: nodes whose last
// fence is F refuse a proposal of F (not above it) and grant F+1; nodes at
// 2^63-1 have no fence left, and Obtain says so.
func TestQuorumFencesExactAboveDoubles(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	ctx := ctxT(t, 20*time.Second)
	for _, last := range []int64{1<<53 + 1, math.MaxInt64 - 1, math.MaxInt64} {
		key := "qf-" + strconv.FormatInt(last, 10)
		for _, rdb := range q.rdbs {
			v := "~:" + strconv.FormatInt(last, 10) + ": 0123456789ab"
			if err := rdb.Set(ctx, redislock.LockKey(key), v, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		c := q.client(t)
		l, err := c.Obtain(ctx, key, time.Minute)
		if last == math.MaxInt64 {
			if err == nil || errors.Is(err, redislock.ErrNotObtained) || !strings.Contains(err.Error(), "no fence is left") {
				t.Errorf("quorum Obtain after fence MaxInt64: %v, want the error that no fence is left", err)
			}
			continue
		}
		if err != nil || l.Fence() != last+1 {
			t.Fatalf("quorum Obtain after %d: fence %d, %v; want %d", last, l.Fence(), err, last+1)
		}
		eventually(t, 10*time.Second, "every node holds the grant", func() bool { return q.holders(t, key, l.Token()) == 3 })
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
