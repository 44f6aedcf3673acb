package redislock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/internal/testkit"
)

// The fair queue under server clock steps (docs/limitations.md, Clocks).

// fairKeys are the keys of a fair lock on key: lock, queue, deadlines.
func fairKeys(key string) []string {
	k := redislock.LockKey(key)
	return []string{k, k + ":queue", k + ":qexp"}
}

// fairAttempt runs one attempt of a fair Obtain with ticket, as a waiter
// does (scripts/fair_obtain.lua), and returns whether it was granted.
func fairAttempt(t *testing.T, ctx context.Context, rdb redis.Scripter, key, ticket string, qttl time.Duration) bool {
	t.Helper()
	r, err := script.FairObtain{Keys: fairKeys(key), Token: ticket + "-token", TTL: int64(60_000),
		QueueTTL: qttl.Milliseconds(), Ticket: ticket, Holder: ""}.Run(ctx, rdb)
	require.NoError(t, err)
	return r.Status == script.Granted
}

// queueDeadlines are the fair queue's entries of key by ticket, each with
// the time its entry has left on the server's clock.
func queueDeadlines(t *testing.T, ctx context.Context, rdb *redis.Client, key string) map[string]time.Duration {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(ctx, fairKeys(key)[2], 0, -1).Result()
	require.NoError(t, err)
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	out := make(map[string]time.Duration)
	for _, z := range zs {
		if m := z.Member.(string); m != "~" { // "~": the scripts' clock mark
			out[m] = time.Duration(int64(z.Score)-now.UnixMilli()) * time.Millisecond
		}
	}
	return out
}

// A waiter that died holds up a fair queue for at most the queue TTL after
// its last attempt, also when the server's clock steps back meanwhile: its
// entry keeps the lifetime it had left, and the step does not lengthen it.
func TestClockServerStepBackFairQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.StartClock(t)
	rdb := srv.Client(nil)
	ctx := testkit.Context(t)
	const key, qttl = "fairback", 3 * time.Second
	opts := []redislock.ClientOption{redislock.WithFair(true), redislock.WithQueueTTL(qttl)}
	a, b := newClient(t, rdb, opts...), newClient(t, rdb, opts...)
	la := obtainInValidity(t, ctx, a, key, time.Minute)
	// A waiter's attempt, after which it died: its entry heads the queue.
	require.False(t, fairAttempt(t, ctx, rdb, key, "dead", qttl))

	type result struct {
		l   *redislock.Lock
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		// 30 s: the queue TTL and a loaded machine's delays, not the step.
		bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		l, err := b.Obtain(bctx, key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(100*time.Millisecond)))
		got <- result{l, err, time.Now()}
	}()
	require.Eventually(t, func() bool { return queueLen(t, rdb, key) == 2 }, 10*time.Second, 5*time.Millisecond, "live waiter queued behind the dead one")

	srv.Step(-time.Hour)
	// The live waiter's next attempt renews its entry from the stepped
	// clock: then the script has seen the step.
	require.Eventually(t, func() bool {
		for m, left := range queueDeadlines(t, ctx, rdb, key) {
			if m != "dead" && left <= qttl {
				return true
			}
		}
		return false
	}, 20*time.Second, 5*time.Millisecond, "live waiter tried after the step")
	left, ok := queueDeadlines(t, ctx, rdb, key)["dead"]
	if ok {
		assert.LessOrEqual(t, left, qttl, "dead waiter's entry outlives the queue TTL after a step back")
	}

	released := time.Now()
	require.NoError(t, la.Release(ctx))
	r := <-got
	require.NoError(t, r.err, "live waiter behind a dead one after a step back")
	t.Logf("the live waiter got the lock %v after the release", r.at.Sub(released).Round(time.Millisecond))
	assert.Greater(t, r.l.Fence(), la.Fence())
	require.NoError(t, r.l.Release(ctx))
	assert.Zero(t, queueLen(t, rdb, key), "queue left behind")
}

// A server clock stepped forward past the queue TTL expires the waiters'
// entries at once: a live waiter loses its place (the next attempt joins
// at the tail again) and nothing else; the lock itself, held for longer
// than the step, stays held and goes to one waiter at a time.
func TestClockServerStepForwardFairQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.StartClock(t)
	rdb := srv.Client(nil)
	ctx := testkit.Context(t)
	const key, qttl = "fairfwd", 3 * time.Second
	a := newClient(t, rdb, redislock.WithFair(true))
	la := obtainInValidity(t, ctx, a, key, time.Minute)
	require.False(t, fairAttempt(t, ctx, rdb, key, "w1", qttl))
	require.False(t, fairAttempt(t, ctx, rdb, key, "w2", qttl))

	srv.Step(10 * time.Second)
	// w2 tries first after the step: both entries had expired, so w2 now
	// heads the queue and w1 joins behind it.
	require.False(t, fairAttempt(t, ctx, rdb, key, "w2", qttl))
	require.False(t, fairAttempt(t, ctx, rdb, key, "w1", qttl))
	q, err := rdb.ZRange(ctx, fairKeys(key)[1], 0, -1).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"w2", "w1"}, q, "queue after the step")

	require.NoError(t, la.Refresh(ctx, time.Minute), "holder's refresh after a step shorter than its TTL")
	require.NoError(t, la.Release(ctx))
	assert.False(t, fairAttempt(t, ctx, rdb, key, "w1", qttl), "w1 granted ahead of the new head")
	assert.True(t, fairAttempt(t, ctx, rdb, key, "w2", qttl), "the head after the step")
	assert.False(t, fairAttempt(t, ctx, rdb, key, "w1", qttl), "w1 granted while w2 holds the lock")
	v, err := rdb.Get(ctx, fairKeys(key)[0]).Result()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(v, "w2-token:"), "lock value %q: not w2's grant", v)
}

// The queue keys, the scripts' clock mark "~" with them, disappear with the
// queue's last entry: when the last waiter gives up, or is granted the lock.
func TestFairQueueKeysGo(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := testkit.Context(t)
		const key = "fairkeys"
		c := newClient(t, b.rdb, redislock.WithFair(true))
		gone := func(when string) {
			t.Helper()
			n, err := b.rdb.Exists(ctx, fairKeys(key)[1:]...).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "queue keys left %s", when)
		}
		l := obtainInValidity(t, ctx, c, key, time.Minute)
		// A waiter that gives up.
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := c.Obtain(wctx, key, time.Second, redislock.WithRetry(redislock.LinearBackoff(50*time.Millisecond)))
			done <- err
		}()
		require.Eventually(t, func() bool { return queueLen(t, b.rdb, key) == 1 }, 5*time.Second, 5*time.Millisecond, "waiter queued")
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		gone("after the last waiter left")
		// A waiter granted the lock.
		require.False(t, fairAttempt(t, ctx, b.rdb, key, "w", 3*time.Second))
		require.NoError(t, l.Release(ctx))
		require.True(t, fairAttempt(t, ctx, b.rdb, key, "w", 3*time.Second))
		gone("after the last waiter was granted the lock")
	})
}
