package redislock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHandoff: a Release while another caller of the same Client waits for
// the key hands the lock straight to that caller: its grant has the next
// fence and its own TTL, the lock key holds its token, the waiter sends no
// attempt of its own, and the releaser's grant is gone (a stale Release or
// Refresh of it is ErrNotHeld).
func TestHandoff(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx := testkit.Context(t)
		// Load the scripts first: no NOSCRIPT round below.
		warm, err := c.Obtain(ctx, "ho-warm", time.Minute)
		require.NoError(t, err)
		require.NoError(t, warm.Release(ctx))
		held, err := c.Obtain(ctx, "ho", time.Minute)
		require.NoError(t, err)
		base := scriptCalls(t, b)
		got := make(chan *redislock.Lock, 1)
		go func() {
			l, err := c.Obtain(ctx, "ho", 30*time.Second, redislock.WithRetry(redislock.LinearBackoff(5*time.Second)))
			assert.NoError(t, err)
			got <- l
		}()
		channel := redislock.DefaultPrefix + "{ho}:wake"
		require.Eventually(t, func() bool { return numSub(t, b.rdb, channel) == 1 }, 5*time.Second, 5*time.Millisecond, "the waiter subscribed")
		// Its attempt and its recheck after subscribing are done.
		require.Eventually(t, func() bool { return b.real == nil || scriptCalls(t, b)-base == 2 }, 5*time.Second, 5*time.Millisecond, "the waiter's two attempts")
		before := scriptCalls(t, b)
		require.NoError(t, held.Release(ctx))
		l := <-got
		if l == nil {
			return
		}
		defer l.Release(ctx)
		n := scriptCalls(t, b) - before
		require.False(t, b.real != nil && n != 1, "%d script calls from release to grant, want 1 (the handoff)", n)
		require.Equal(t, held.Fence()+1, l.Fence(), "handed fence after %d", held.Fence())
		v := b.rdb.Get(ctx, redislock.DefaultPrefix+"{ho}").Val()
		require.True(t, strings.HasPrefix(v, l.Token()+":"), "lock key holds %q, want the waiter's token", v)
		if ttl, err := l.TTL(ctx); err != nil || ttl > 30*time.Second || ttl < 20*time.Second {
			require.Fail(t, fmt.Sprintf("handed TTL %v (%v), want the waiter's 30s", ttl, err))
		}
		require.ErrorIs(t, held.Refresh(ctx, time.Minute), redislock.ErrNotHeld, "the releaser's Refresh after the handoff")
		require.ErrorIs(t, held.Release(ctx), redislock.ErrNotHeld, "second Release")
	})
}

// TestHandoffChainEnds: callers of one Client that keep a key busy hand it to
// each other, but not forever: a waiter of another Client still gets it.
func TestHandoffChainEnds(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		busy := newClient(t, b.rdb, redislock.WithRetry(redislock.LinearBackoff(time.Second)))
		other := newClient(t, b.rdb)
		ctx := testkit.Context(t)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					l, err := busy.Obtain(ctx, "chain", time.Minute)
					if !assert.NoError(t, err) {
						return
					}
					if !assert.NoError(t, l.Release(ctx)) {
						return
					}
				}
			})
		}
		defer wg.Wait()
		defer close(stop)
		require.Eventually(t, func() bool {
			n, _ := redislock.LocalWaiters(busy, "chain")
			return n >= 2
		}, 5*time.Second, 5*time.Millisecond, "the busy Client's waiters queued")
		l, err := other.Obtain(testkit.Context(t), "chain", time.Minute,
			redislock.WithRetry(redislock.LinearBackoff(5*time.Second)))
		require.NoError(t, err, "another Client's waiter never got the busy key")
		_ = l.Release(ctx)
	})
}

// TestHandoffLeavingWaiters: waiters that give up while locks are handed to
// them leave no grant behind: once every caller is done and the Client is
// closed, the lock is free.
func TestHandoffLeavingWaiters(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := redislock.New(b.rdb, redislock.WithRetry(redislock.LinearBackoff(time.Millisecond)))
		ctx := testkit.Context(t)
		// Load the scripts first: a call cut short by its ctx returns no
		// lock, and the first calls take longer than most of the waits below.
		warm, err := c.Obtain(ctx, "leaving", time.Minute)
		require.NoError(t, err)
		require.NoError(t, warm.Release(ctx))
		var wg sync.WaitGroup
		var grants int
		var mu sync.Mutex
		for range 8 {
			wg.Go(func() {
				for i := range 60 {
					// Mostly waiters that give up within 2-52 ms; every
					// tenth call waits up to 5 s, so that grants happen
					// however slow a loaded machine makes each call.
					wait := 2*time.Millisecond + time.Duration(rand.IntN(50000))*time.Microsecond
					if i%10 == 0 {
						wait = 5 * time.Second
					}
					octx, cancel := context.WithTimeout(ctx, wait)
					l, err := c.Obtain(octx, "leaving", time.Minute)
					cancel()
					if err != nil {
						assert.ErrorIs(t, err, context.DeadlineExceeded)
						continue
					}
					mu.Lock()
					grants++
					mu.Unlock()
					assert.NoError(t, l.Release(ctx))
				}
			})
		}
		wg.Wait()
		_ = c.Close()
		require.NotEqual(t, 0, grants, "no grants: the test exercised nothing")
		require.False(t, held(ctx, b.rdb, redislock.DefaultPrefix+"{leaving}"), "after %d grants the lock is still held by %q: a handed grant leaked", grants, b.rdb.Get(ctx, redislock.DefaultPrefix+"{leaving}").Val())
	})
}

// TestHandoffQueue: callers of one Client waiting for a key are granted in
// arrival order, each by a handoff, and only the longest-waiting one makes
// attempts (however short the others' backoff): while 8 callers queue, Redis
// runs only the first one's two attempts. (Once the first is granted the
// next is the longest-waiting and polls at its own pace until the lock is
// handed to it; how often depends on scheduling, so that phase is checked by
// the handoff count of each grant, not by the script count.)
func TestHandoffQueue(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		scripts := &scriptHook{}
		b.rdb.AddHook(scripts)
		c := newClient(t, b.rdb)
		ctx := testkit.Context(t)
		warm, err := c.Obtain(ctx, "warm", time.Minute) // load the scripts: no NOSCRIPT round below
		require.NoError(t, err)
		_ = warm.Release(ctx)
		before := scripts.calls.Load()
		held, err := c.Obtain(ctx, "queue", time.Minute)
		require.NoError(t, err)
		const waiters = 8
		var mu sync.Mutex
		var order, handoffs []int
		var wg sync.WaitGroup
		turns := make([]countedRetry, waiters)
		for i := range turns {
			turns[i] = newCountedRetry(redislock.LinearBackoff(10 * time.Millisecond))
		}
		for i := range waiters {
			wg.Go(func() {
				// The first waiter polls rarely, the others often: an
				// attempt by any of those would show in the count.
				var retry redislock.RetryStrategy = turns[i]
				if i == 0 {
					retry = redislock.LinearBackoff(10 * time.Second)
				}
				l, err := c.Obtain(ctx, "queue", time.Minute, redislock.WithRetry(retry))
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				order = append(order, i)
				handoffs = append(handoffs, redislock.Handoffs(l))
				mu.Unlock()
				assert.NoError(t, l.Release(ctx))
			})
			// The next one arrives after this one queued (and, for the
			// first, made its attempt and its recheck).
			require.Eventually(t, func() bool {
				n, ready := redislock.LocalWaiters(c, "queue")
				return n == i+1 && ready && scripts.calls.Load()-before >= 3
			}, 5*time.Second, 5*time.Millisecond, "the waiter queued")
		}
		// A window in which each of the others' 10 ms backoff passes ten
		// times (ten turns of its wait loop, each where an attempt would
		// be): an attempt by any of them would show in the count.
		for _, r := range turns[1:] {
			r.await(t, 10)
		}
		// 1 obtain + 2 attempts of the first waiter.
		require.Equal(t, int32(3), scripts.calls.Load()-before, "script calls while callers queued, want 3: waiters behind the first made attempts")
		require.NoError(t, held.Release(ctx))
		wg.Wait()
		for i, w := range order {
			require.Equal(t, i, w, "grant order %v with handoffs in a row %v, want arrival order, each grant by a handoff", order, handoffs)
			require.Equal(t, i+1, handoffs[i], "grant order %v with handoffs in a row %v, want arrival order, each grant by a handoff", order, handoffs)
		}
	})
}

// TestNotifyNoBargingWithinClient: a caller of the Client that arrives while
// another caller of the same Client waits for the key is granted after it,
// even when it arrives the moment the lock was released (before the woken
// waiter could try).
func TestNotifyNoBargingWithinClient(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		scripts := &scriptHook{}
		b.rdb.AddHook(scripts)
		c := newClient(t, b.rdb)
		ctx := testkit.Context(t)
		long := redislock.WithRetry(redislock.LinearBackoff(5 * time.Second))
		held, err := c.Obtain(ctx, "fifo", time.Minute)
		require.NoError(t, err)
		before := scripts.calls.Load()
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		take := func(name string) {
			defer wg.Done()
			l, err := c.Obtain(ctx, "fifo", time.Minute, long)
			if !assert.NoError(t, err, name) {
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			_ = l.Release(ctx)
		}
		wg.Add(1)
		go take("first")
		// Subscribed, and its recheck after subscribing done: it sleeps.
		require.Eventually(t, func() bool {
			n, ready := redislock.LocalWaiters(c, "fifo")
			return n == 1 && ready && scripts.calls.Load()-before == 2
		}, 5*time.Second, 5*time.Millisecond, "the first waiter's attempt and recheck")
		require.NoError(t, held.Release(ctx))
		wg.Add(1)
		take("second") // arrives at once, with the lock free
		wg.Wait()
		require.Equal(t, 2, len(order), "grant order %v, want the waiting caller first", order)
		require.Equal(t, "first", order[0], "grant order %v, want the waiting caller first", order)
	})
}

// TestQuorumLocalQueue: in quorum mode, callers of one Client queue for a
// key: only the longest-waiting one makes attempts, however short the
// others' backoff, and a Release by the Client wakes it at once, so they
// are granted in arrival order.
func TestQuorumLocalQueue(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := testkit.Context(t)
	held, err := c.Obtain(ctx, "lq", time.Minute)
	require.NoError(t, err)
	// Obtain returns at a majority: wait until the third node ran its
	// grant too, so that it is not counted below as a waiter's attempt.
	require.Eventually(t, func() bool { return q.holders(t, "lq", held.Token()) == 3 }, 5*time.Second, 5*time.Millisecond, "the grant on every node")
	calls := func() int { return evalCalls(q.rdbs[0].(*redis.Client)) }
	before := calls()
	const waiters = 8
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	turns := make([]countedRetry, waiters)
	for i := range turns {
		turns[i] = newCountedRetry(redislock.LinearBackoff(5 * time.Millisecond))
	}
	for i := range waiters {
		wg.Go(func() {
			// The first waiter's backoff outlasts the test: only the
			// release's wake-up gets it the lock in time. The others
			// would poll often, were they not queued behind it.
			var retry redislock.RetryStrategy = turns[i]
			if i == 0 {
				retry = redislock.LinearBackoff(time.Minute)
			}
			l, err := c.Obtain(ctx, "lq", time.Minute, redislock.WithRetry(retry))
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			assert.NoError(t, l.Release(ctx))
		})
		require.Eventually(t, func() bool {
			n, _ := redislock.LocalWaiters(c, "lq")
			return n == i+1
		}, 5*time.Second, 5*time.Millisecond, "the waiter queued")
	}
	// A window in which each of the others' 5 ms backoff passes twenty
	// times (twenty turns of its wait loop, each where an attempt would
	// be): an attempt by any of them would show in the count.
	for _, r := range turns[1:] {
		r.await(t, 20)
	}
	require.Equal(t, 1, calls()-before, "attempts on node 0 while %d callers waited, want 1 (the first one's): waiters behind it made attempts", waiters)
	require.NoError(t, held.Release(ctx))
	wg.Wait()
	require.Equal(t, waiters, len(order), "of %d waiters granted", waiters)
	for i, w := range order {
		require.Equal(t, i, w, "grant order %v, want arrival order", order)
	}
}
