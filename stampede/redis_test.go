package stampede_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/stampede"
)

// redisBackend returns a function that makes a fresh Client (its own
// connections and subscription, as another process would have) on srv.
func redisBackend(t *testing.T, srv *redistest.Server) func() (lease.Locker, lease.Store) {
	return func() (lease.Locker, lease.Store) {
		c := redislock.New(srv.Client(nil))
		t.Cleanup(func() { _ = c.Close() })
		return c.Locker(), c.Store()
	}
}

// countingStore counts the reads of the cache.
type countingStore struct {
	lease.Store
	gets atomic.Int32
}

func (s *countingStore) Get(ctx context.Context, key string) (lease.Record, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, key)
}

// On real Redis, one Group fills while two others wait for its release,
// which they hear through pub/sub: each reads the cache twice (the miss,
// and under the lock after the wake-up), however long the fill takes.
func TestRedisOneFillNoPolling(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var stores []*countingStore
	backend := redisBackend(t, srv)
	fills, rs := crowdOn(t, func() (lease.Locker, lease.Store) {
		l, s := backend()
		cs := &countingStore{Store: s}
		stores = append(stores, cs)
		return l, cs
	}, 20, func(context.Context) ([]byte, error) {
		// Simulated work, longer than the waiters' longest backoff, so
		// that a waiter that polled the cache would read it again.
		time.Sleep(600 * time.Millisecond)
		return []byte("v"), nil
	})
	if n := fills.Load(); n != 1 {
		t.Errorf("%d fills, want 1", n)
	}
	for i, r := range rs {
		require.False(t, r.err != nil, "caller %d: %q, %v", i, r.val, r.err)
		require.Equal(t, "v", string(r.val), "caller %d: %q, %v", i, r.val, r.err)
	}
	for i, s := range stores {
		if n := s.gets.Load(); n != 2 {
			t.Errorf("group %d read the cache %d times, want 2", i, n)
		}
	}
}

// On real Redis: a panicking fill gives every caller in every Group an
// error, and leaves no goroutine behind once the Groups are closed.
func TestRedisPanic(t *testing.T) { // not parallel: it counts the goroutines left
	srv := redistest.Start(t)
	before := goleak.IgnoreCurrent()
	// Runs after the Groups and Clients are closed (cleanups run last in,
	// first out).
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	fills, rs := crowdOn(t, redisBackend(t, srv), 20, func(context.Context) ([]byte, error) { panic("boom") })
	if n := fills.Load(); n != 1 {
		t.Errorf("%d fills, want 1", n)
	}
	for i, r := range rs {
		require.ErrorIs(t, r.err, stampede.ErrPanicked, "caller %d: %q, %v; want the panic", i, r.val, r.err)
	}
}

// A backend error names what failed once: "redislock: stampede: get ...",
// not "redislock: stampede: ...: redislock: ...".
func TestRedisBackendErrorText(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locker, store := redisBackend(t, srv)()
	g := newGroup(t, locker, store)
	srv.Close() // Redis is gone
	_, err := g.Do(context.Background(), "k", time.Minute, func(context.Context) ([]byte, error) { return []byte("v"), nil })
	require.Error(t, err, "Do succeeded with Redis down")
	if msg := err.Error(); strings.Count(msg, "redislock: ") != 1 || strings.Contains(msg, "node 0") {
		t.Errorf("stutter in %q", msg)
	}
}

// On real Redis, three Clients (processes, in effect): a fill that times
// out runs once, and every caller of every Client gets its timeout, within
// about one fill timeout.
func TestRedisFillTimeoutReachesWaiters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	fills, rs := crowdOn(t, redisBackend(t, srv), 10, hang, stampede.WithFillTimeout(100*time.Millisecond))
	checkTimedOut(t, fills.Load(), rs, 10)
}
