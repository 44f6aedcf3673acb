package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
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
		holder, err := holders[(i+i/10)%2].Obtain(ctxT(t, 5*time.Second), key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(i%10) * 300 * time.Microsecond
		released := make(chan error, 1)
		go func() {
			time.Sleep(delay)
			released <- holder.Release(context.Background())
		}()
		// A backoff longer than the ctx: a waiter that missed the release
		// would sleep until the ctx ends, and fail.
		l, err := c.Obtain(ctxT(t, 10*time.Second), key, time.Minute,
			redislock.WithRetry(redislock.LinearBackoff(time.Hour)))
		if rerr := <-released; rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			t.Fatalf("round %d (release after %v): %v: the release was missed and the waiter slept its backoff", i, delay, err)
		}
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNotifyExpiryWakes: a lock that expires without a release publishes
// nothing; the waiter wakes at the remaining TTL its attempt reported, not
// at its 5 s backoff.
func TestNotifyExpiryWakes(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(nil))
	key := t.Name()
	if _, err := c.Obtain(ctxT(t, time.Second), key, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// A backoff longer than the ctx: a waiter that ignored the holder's
	// remaining TTL would sleep until the ctx ends, and fail.
	l, err := c.Obtain(ctxT(t, 10*time.Second), key, time.Second, redislock.WithRetry(redislock.LinearBackoff(time.Hour)))
	if err != nil {
		t.Fatalf("%v: the waiter ignored the holder's remaining TTL", err)
	}
	defer l.Release(context.Background())
}

// TestWaitMutualExclusion: 32 goroutines increment a counter with a
// non-atomic read-modify-write on Redis that only the lock protects; the
// count must be exact in every waiting mode.
func TestWaitMutualExclusion(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		for _, m := range waitModes {
			t.Run(m.name, func(t *testing.T) {
				const workers, rounds = 32, 4
				c := newClient(t, b.rdb, m.opts...)
				key, counter := t.Name(), t.Name()+":counter"
				ctx := ctxT(t, 60*time.Second)
				var wg sync.WaitGroup
				errs := make(chan error, workers)
				for range workers {
					wg.Go(func() {
						for range rounds {
							err := c.Run(ctx, key, 2*time.Second, func(ctx context.Context, _ *redislock.Lock) error {
								v, err := b.rdb.Get(ctx, counter).Int()
								if err != nil && !errors.Is(err, redis.Nil) {
									return err
								}
								time.Sleep(100 * time.Microsecond) // widen the race window
								return b.rdb.Set(ctx, counter, v+1, 0).Err()
							}, redislock.WithRetry(redislock.ExponentialBackoff(5*time.Millisecond, 200*time.Millisecond)))
							if err != nil {
								errs <- err
								return
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				got, err := b.rdb.Get(ctx, counter).Int()
				if err != nil {
					t.Fatal(err)
				}
				if got != workers*rounds {
					t.Fatalf("counter = %d, want %d: two holders at once", got, workers*rounds)
				}
			})
		}
	})
}

// pubsubClients counts the server's connections in pub/sub mode.
func pubsubClients(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	list, err := rdb.Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, "\n")
}

func numSub(t *testing.T, rdb *redis.Client, channels ...string) int64 {
	t.Helper()
	m, err := rdb.PubSubNumSub(context.Background(), channels...).Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func numChannels(t *testing.T, rdb *redis.Client, pattern string) int {
	t.Helper()
	chs, err := rdb.PubSubChannels(context.Background(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(chs)
}

// TestNotifyOneConnection: 1,000 waiters on 100 keys share one subscription
// connection, subscribe each channel once, and all get the lock in turn.
func TestNotifyOneConnection(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(func(o *redis.Options) { o.PoolSize = 20 })
	c := newClient(t, rdb)
	const keys, waiters = 100, 1000
	holders := make([]*redislock.Lock, keys)
	for i := range holders {
		var err error
		if holders[i], err = c.Obtain(ctxT(t, time.Second), fmt.Sprintf("conn-%d", i), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	ctx := ctxT(t, 60*time.Second)
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
	eventually(t, 20*time.Second, "100 channels subscribed", func() bool { return numChannels(t, rdb, "redislock:{conn-*}:wake") == keys })
	if n := pubsubClients(t, rdb); n != 1 {
		t.Fatalf("%d subscription connections for %d waiters, want 1", n, waiters)
	}
	for _, h := range holders {
		if err := h.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for _, err := range errs {
		t.Fatal(err)
	}
	// The last waiter of each channel unsubscribed it.
	eventually(t, 5*time.Second, "channels unsubscribed", func() bool { return numChannels(t, rdb, "redislock:*") == 0 })
	if n := pubsubClients(t, rdb); n > 1 {
		t.Fatalf("%d subscription connections after the wait, want at most 1", n)
	}
	_ = c.Close()
	eventually(t, 5*time.Second, "subscription connection closed by Close", func() bool { return pubsubClients(t, rdb) == 0 })
}

// TestNotifyCancelledWaitersLeaveNothing: waiters whose ctx ends leave no
// subscription behind (goleak in TestMain checks the goroutines after
// Close).
func TestNotifyCancelledWaitersLeaveNothing(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	key := t.Name()
	h, err := c.Obtain(ctxT(t, time.Second), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, err := c.Obtain(ctx, key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(time.Minute)))
			// ErrNotObtained when the cancellation came during a wait; a
			// call cut short by it reports its own error; both carry ctx's.
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Obtain = %v, want an error matching context.Canceled", err)
			}
		})
	}
	channel := "redislock:{" + key + "}:wake"
	eventually(t, 5*time.Second, "waiters subscribed", func() bool { return numSub(t, rdb, channel) == 1 })
	cancel()
	wg.Wait()
	eventually(t, 5*time.Second, "subscription left by cancelled waiters", func() bool { return numSub(t, rdb, channel) == 0 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNotifyDeadSubscription: the subscription connection is killed while
// waiters wait; they fall back to their backoff, and the client subscribes
// again on a new connection.
func TestNotifyDeadSubscription(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	key := t.Name()
	channel := "redislock:{" + key + "}:wake"
	h, err := c.Obtain(ctxT(t, time.Second), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Obtain(ctxT(t, 20*time.Second), key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(300*time.Millisecond)))
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	eventually(t, 5*time.Second, "waiter subscribed", func() bool { return numSub(t, rdb, channel) == 1 })
	if err := rdb.Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}

	// A new waiter is notified again through a new connection.
	h, err = c.Obtain(ctxT(t, time.Second), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		l, err := c.Obtain(ctxT(t, 20*time.Second), key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(10*time.Second)))
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	eventually(t, 10*time.Second, "waiter subscribed again", func() bool { return numSub(t, rdb, channel) == 1 })
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken on the replacement connection")
	}
}

// TestWaitPollingClients: Ring clients poll, and so does quorum mode, but
// for the queue within the Client (it has no pub/sub); contended waits
// still end in a grant after the release.
func TestWaitPollingClients(t *testing.T) {
	var nodes []redis.UniversalClient
	addrs := map[string]string{}
	for i := range 3 {
		m := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		nodes = append(nodes, rdb)
		addrs[fmt.Sprint(i)] = m.Addr()
	}
	q, err := redislock.NewQuorum(nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs})
	t.Cleanup(func() { _ = ring.Close() })
	for name, c := range map[string]*redislock.Client{"quorum": q, "ring": newClient(t, ring)} {
		t.Run(name, func(t *testing.T) {
			h, err := c.Obtain(ctxT(t, time.Second), t.Name(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				time.Sleep(50 * time.Millisecond)
				_ = h.Release(context.Background())
			}()
			l, err := c.Obtain(ctxT(t, 10*time.Second), t.Name(), time.Second, redislock.WithRetry(redislock.LinearBackoff(20*time.Millisecond)))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNotifySilentSubscription: the subscription connection goes silent
// (a proxy stops forwarding it, but keeps it open). The waiter does not
// hang: its backoff gets it the lock. The client notices the silence,
// replaces the connection, and notifies the next waiter again.
func TestNotifySilentSubscription(t *testing.T) {
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
			l, err := c.Obtain(ctxT(t, 30*time.Second), key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(backoff)))
			if err == nil {
				err = l.Release(context.Background())
			}
			got <- err
		}()
		return got
	}

	h, err := holderC.Obtain(ctxT(t, time.Second), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := wait(500 * time.Millisecond)
	eventually(t, 5*time.Second, "waiter subscribed", func() bool { return numSub(t, direct, channel) == 1 })
	proxy.CutSubscribers()
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter hung on a silent subscription connection")
	}

	// The next waiter subscribes again on a new connection and is woken
	// by the release, long before its 20 s backoff.
	h, err = holderC.Obtain(ctxT(t, time.Second), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got = wait(time.Hour) // longer than its ctx: only a release can wake it
	// The frozen connection is dropped (the server sees it close) and the
	// channel is subscribed on the live one.
	eventually(t, 15*time.Second, "silent connection replaced", func() bool {
		return pubsubClients(t, direct) == 1 && numSub(t, direct, channel) == 1
	})
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Its backoff is longer than its ctx: only the release can wake it.
	if err := <-got; err != nil {
		t.Fatalf("waiter not woken on the replacement connection: %v", err)
	}
}
