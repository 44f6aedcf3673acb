package redislock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitModes are the ways a waiter can wait for a contended lock.
var waitModes = []struct {
	name string
	opts []redislock.ClientOption
}{
	{"polling", []redislock.ClientOption{redislock.WithNotify(false)}},
	{"notified", []redislock.ClientOption{redislock.WithNotify(true)}},
	{"fair", []redislock.ClientOption{redislock.WithNotify(true), redislock.WithFair(true)}},
}

// TestNotifyNoLostWakeup: see checkNoLostWakeup.
func TestNotifyNoLostWakeup(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		for _, sharded := range []bool{false, true} {
			if sharded && b.real == nil {
				continue // miniredis has no SPUBLISH
			}
			t.Run(fmt.Sprintf("sharded=%v", sharded), func(t *testing.T) {
				checkNoLostWakeup(t, b.rdb, 30, redislock.WithShardedPubSub(sharded))
			})
		}
	})
}

// TestNotifyCluster: notified waiting on Redis Cluster, with PUBLISH
// (broadcast) and with sharded pub/sub (one subscription per master).
func TestNotifyCluster(t *testing.T) {
	t.Parallel()
	cc := startCluster(t)
	for _, sharded := range []bool{false, true} {
		t.Run(fmt.Sprintf("sharded=%v", sharded), func(t *testing.T) {
			checkNoLostWakeup(t, cc, 10, redislock.WithShardedPubSub(sharded))
		})
	}
}

// checkNoLostWakeup releases the lock while a waiter is between its failed
// attempt and its subscription (and everywhere around that moment): the
// waiter must still be granted long before its 5 s backoff, which it would
// only sleep through if the release went unnoticed. The holder alternates
// between the waiter's Client (a handoff) and another Client (a wake-up).
func checkNoLostWakeup(t *testing.T, rdb redis.UniversalClient, rounds int, opts ...redislock.ClientOption) {
	c := newClient(t, rdb, opts...)
	holders := []*redislock.Client{c, newClient(t, rdb, opts...)}
	for i := range rounds {
		key := fmt.Sprintf("%s-lost-wakeup-%d", t.Name(), i)
		holder, err := holders[(i+i/10)%2].Obtain(testkit.Context(t), key, time.Minute)
		require.NoError(t, err)
		delay := time.Duration(i%10) * 300 * time.Microsecond
		released := make(chan error, 1)
		go func() {
			time.Sleep(delay) // a sleep: the release lands at varied offsets from the waiter's subscribe
			released <- holder.Release(context.Background())
		}()
		// A backoff longer than the ctx: a waiter that missed the release
		// would sleep until the ctx ends, and fail.
		l, err := c.Obtain(testkit.Context(t), key, time.Minute,
			redislock.WithRetry(redislock.LinearBackoff(time.Hour)))
		require.NoError(t, <-released)
		require.NoError(t, err, "round %d (release after %v): the release was missed and the waiter slept its backoff", i, delay)
		require.NoError(t, l.Release(context.Background()))
	}
}

// TestNotifyExpiryWakes: a lock that expires without a release publishes
// nothing; the waiter wakes at the remaining TTL its attempt reported, not
// at its 5 s backoff.
func TestNotifyExpiryWakes(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(nil))
	key := t.Name()
	_, err := c.Obtain(testkit.Context(t), key, time.Second)
	require.NoError(t, err)
	// A backoff longer than the ctx: a waiter that ignored the holder's
	// remaining TTL would sleep until the ctx ends, and fail.
	l, err := c.Obtain(testkit.Context(t), key, time.Second, redislock.WithRetry(redislock.LinearBackoff(time.Hour)))
	require.NoError(t, err, "the waiter ignored the holder's remaining TTL")
	defer l.Release(context.Background())
}

// TestWaitMutualExclusion: 32 goroutines (8 on miniredis) take the lock by
// Run in turn (exclusion), in every waiting mode.
func TestWaitMutualExclusion(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		for _, m := range waitModes {
			t.Run(m.name, func(t *testing.T) {
				// miniredis runs one script at a time, in Go (slow under
				// -race): there the modes take turns, with 8 callers of
				// 16 rounds (the same 128 grants), so that no call queues
				// there past its lease's validity (as soakMiniWorkers).
				workers, rounds := 32, 4
				if b.real != nil {
					t.Parallel()
				} else {
					workers, rounds = 8, 16
				}
				c := newClient(t, b.rdb, m.opts...)
				key := t.Name()
				retry := redislock.WithRetry(redislock.ExponentialBackoff(5*time.Millisecond, 200*time.Millisecond))
				exclusion(t, workers, rounds, func(ctx context.Context, _ int) (int64, func() error, error) {
					return running(func(fn func(fence int64) error) error {
						return c.Run(ctx, key, 2*time.Second, func(_ context.Context, l *redislock.Lock) error { return fn(l.Fence()) }, retry)
					})
				})
			})
		}
	})
}

// pubsubClients counts the server's connections in pub/sub mode.
func pubsubClients(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	list, err := rdb.Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	require.NoError(t, err)
	return strings.Count(list, "\n")
}

func numSub(t *testing.T, rdb *redis.Client, channels ...string) int64 {
	t.Helper()
	m, err := rdb.PubSubNumSub(context.Background(), channels...).Result()
	require.NoError(t, err)
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func numChannels(t *testing.T, rdb *redis.Client, pattern string) int {
	t.Helper()
	chs, err := rdb.PubSubChannels(context.Background(), pattern).Result()
	require.NoError(t, err)
	return len(chs)
}

// TestNotifyOneConnection: 1,000 waiters on 100 keys share one subscription
// connection, subscribe each channel once, and all get the lock in turn.
func TestNotifyOneConnection(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(func(o *redis.Options) { o.PoolSize = 20 })
	c := newClient(t, rdb)
	const keys, waiters = 100, 1000
	holders := make([]*redislock.Lock, keys)
	for i := range holders {
		var err error
		holders[i], err = c.Obtain(testkit.Context(t), fmt.Sprintf("conn-%d", i), time.Minute)
		require.NoError(t, err)
	}
	ctx := testkit.Context(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range waiters {
		wg.Go(func() {
			l, err := c.Obtain(ctx, fmt.Sprintf("conn-%d", i%keys), time.Minute, redislock.WithRetry(redislock.LinearBackoff(30*time.Second)))
			if err == nil {
				err = l.Release(context.Background())
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	require.Eventually(t, func() bool { return numChannels(t, rdb, "redislock:{conn-*}:wake") == keys }, 20*time.Second, 5*time.Millisecond, "100 channels subscribed")
	require.Equal(t, 1, pubsubClients(t, rdb), "subscription connections for %d waiters, want 1", waiters)
	for _, h := range holders {
		require.NoError(t, h.Release(context.Background()))
	}
	wg.Wait()
	require.Empty(t, errs, "waiters' errors")
	// The last waiter of each channel unsubscribed it.
	require.Eventually(t, func() bool { return numChannels(t, rdb, "redislock:*") == 0 }, 5*time.Second, 5*time.Millisecond, "channels unsubscribed")
	require.LessOrEqual(t, pubsubClients(t, rdb), 1, "subscription connections after the wait, want at most 1")
	_ = c.Close()
	require.Eventually(t, func() bool { return pubsubClients(t, rdb) == 0 }, 5*time.Second, 5*time.Millisecond, "subscription connection closed by Close")
}

// TestNotifyCancelledWaitersLeaveNothing: waiters whose ctx ends leave no
// subscription behind (goleak in TestMain checks the goroutines after
// Close).
func TestNotifyCancelledWaitersLeaveNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	key := t.Name()
	h, err := c.Obtain(testkit.Context(t), key, time.Minute)
	require.NoError(t, err)
	defer h.Release(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, err := c.Obtain(ctx, key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(time.Minute)))
			// ErrNotObtained when the cancellation came during a wait; a
			// call cut short by it reports its own error; both carry ctx's.
			assert.ErrorIs(t, err, context.Canceled, "Obtain, want an error matching context.Canceled")
		})
	}
	channel := "redislock:{" + key + "}:wake"
	require.Eventually(t, func() bool { return numSub(t, rdb, channel) == 1 }, 5*time.Second, 5*time.Millisecond, "waiters subscribed")
	cancel()
	wg.Wait()
	require.Eventually(t, func() bool { return numSub(t, rdb, channel) == 0 }, 5*time.Second, 5*time.Millisecond, "subscription left by cancelled waiters")
	require.NoError(t, c.Close())
}

// TestNotifyDeadSubscription: the subscription connection is killed while
// waiters wait; they fall back to their backoff, and the client subscribes
// again on a new connection.
func TestNotifyDeadSubscription(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	key := t.Name()
	channel := "redislock:{" + key + "}:wake"
	h, err := c.Obtain(testkit.Context(t), key, time.Minute)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := c.Obtain(testkit.Context(t), key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(300*time.Millisecond)))
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return numSub(t, rdb, channel) == 1 }, 5*time.Second, 5*time.Millisecond, "waiter subscribed")
	require.NoError(t, rdb.Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err())
	require.NoError(t, h.Release(context.Background()))
	require.NoError(t, <-got)

	// A new waiter is notified again through a new connection.
	h, err = c.Obtain(testkit.Context(t), key, time.Minute)
	require.NoError(t, err)
	go func() {
		l, err := c.Obtain(testkit.Context(t), key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(10*time.Second)))
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return numSub(t, rdb, channel) == 1 }, 10*time.Second, 5*time.Millisecond, "waiter subscribed again")
	require.NoError(t, h.Release(context.Background()))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		require.Fail(t, "waiter not woken on the replacement connection")
	}
}

// TestWaitPollingClients: Ring clients poll, and so does quorum mode, but
// for the queue within the Client (it has no pub/sub); contended waits
// still end in a grant after the release.
func TestWaitPollingClients(t *testing.T) {
	t.Parallel()
	var nodes []redis.UniversalClient
	addrs := map[string]string{}
	for i := range 3 {
		m := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		nodes = append(nodes, rdb)
		addrs[fmt.Sprint(i)] = m.Addr()
	}
	// The holder releases once the waiter waits.
	var release atomic.Pointer[redislock.Lock]
	obs := redislock.WithObserver(onWait(func() { go release.Load().Release(context.Background()) }))
	q, err := redislock.NewQuorum(nodes, obs, slackNodeTimeout)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs})
	t.Cleanup(func() { _ = ring.Close() })
	for name, c := range map[string]*redislock.Client{"quorum": q, "ring": newClient(t, ring, obs)} {
		t.Run(name, func(t *testing.T) {
			h, err := c.Obtain(testkit.Context(t), t.Name(), time.Minute)
			require.NoError(t, err)
			release.Store(h)
			l, err := c.Obtain(testkit.Context(t), t.Name(), time.Second, redislock.WithRetry(redislock.LinearBackoff(20*time.Millisecond)))
			require.NoError(t, err)
			require.NoError(t, l.Release(context.Background()))
		})
	}
}

// TestNotifySilentSubscription: the subscription connection goes silent
// (a proxy stops forwarding it, but keeps it open). The waiter does not
// hang: its backoff gets it the lock. The client notices the silence,
// replaces the connection, and notifies the next waiter again.
func TestNotifySilentSubscription(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	direct := srv.Client(nil)
	proxy := redistest.StartProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb)
	holderC := newClient(t, direct)
	key := t.Name()
	channel := "redislock:{" + key + "}:wake"

	wait := func(backoff time.Duration) chan error {
		got := make(chan error, 1)
		go func() {
			l, err := c.Obtain(testkit.Context(t), key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(backoff)))
			if err == nil {
				err = l.Release(context.Background())
			}
			got <- err
		}()
		return got
	}

	h, err := holderC.Obtain(testkit.Context(t), key, time.Minute)
	require.NoError(t, err)
	got := wait(500 * time.Millisecond)
	require.Eventually(t, func() bool { return numSub(t, direct, channel) == 1 }, 5*time.Second, 5*time.Millisecond, "waiter subscribed")
	proxy.CutSubscribers()
	require.NoError(t, h.Release(context.Background()))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		require.Fail(t, "waiter hung on a silent subscription connection")
	}

	// The next waiter subscribes again on a new connection and is woken
	// by the release, long before its 20 s backoff.
	h, err = holderC.Obtain(testkit.Context(t), key, time.Minute)
	require.NoError(t, err)
	got = wait(time.Hour) // longer than its ctx: only a release can wake it
	// The frozen connection is dropped (the server sees it close) and the
	// channel is subscribed on the live one.
	require.Eventually(t, func() bool {
		return pubsubClients(t, direct) == 1 && numSub(t, direct, channel) == 1
	}, 15*time.Second, 5*time.Millisecond, "silent connection replaced")
	require.NoError(t, h.Release(context.Background()))
	// Its backoff is longer than its ctx: only the release can wake it.
	require.NoError(t, <-got, "waiter not woken on the replacement connection")
}
