package redislock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAutoPipeline: with many calls in flight the Client batches them through
// go-redis' AutoPipeliner (unless WithAutoPipeline(false)), and every grant,
// fence and release is still right; a lone caller never uses it.
func TestAutoPipeline(t *testing.T) {
	t.Parallel()
	if !redistest.Available(t) {
		return
	}
	srv := redistest.Start(t)
	for _, on := range []bool{true, false} {
		t.Run("on="+strconv.FormatBool(on), func(t *testing.T) {
			c := redislock.New(srv.Client(nil), redislock.WithAutoPipeline(on))
			defer c.Close()
			ctx := context.Background()
			lone, err := c.Obtain(ctx, "lone", time.Minute)
			require.NoError(t, err)
			require.NoError(t, lone.Release(ctx))
			require.False(t, redislock.Pipelined(c), "a lone call set up auto-pipelining")
			ObtainReleaseLoop(ctx, t, c, "ap-"+strconv.FormatBool(on), 64, 50)
			require.Equal(t, on, redislock.Pipelined(c), "auto-pipeliner in use, want %v", on)
		})
	}
}

// TestAutoPipelineFaults: 64 callers through the auto-pipeliner while the
// server pauses writes and then cuts every connection: no call hangs or
// panics, every error is a named outcome, a key is never granted to two
// callers at once, and nothing stays locked after Close but locks whose
// Release reported an error.
func TestAutoPipelineFaults(t *testing.T) {
	t.Parallel()
	if !redistest.Available(t) {
		return
	}
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	admin := srv.Client(nil)
	c := redislock.New(rdb, redislock.WithRetry(redislock.LinearBackoff(time.Millisecond)))
	// A hang guard, not a budget: each step below waits for its event (a
	// count of outcomes, a server state) as long as it takes, up to this.
	const hang = 2 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	const keys = 64 // mostly one key per worker: many calls in flight
	var holders [keys]atomic.Int32
	var grants, failures atomic.Int64
	var mu sync.Mutex
	unreleased := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := (w + i) % keys
				octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
				l, err := c.Obtain(octx, "fault-"+strconv.Itoa(k), 5*time.Second)
				ended := octx.Err() != nil
				ocancel()
				if err != nil {
					// Named outcomes (Obtain's doc): refused, a node's
					// error, a grant confirmed too late, or this call's
					// ctx ending its first attempt.
					var ne *redislock.NodeError
					assert.False(t, !errors.Is(err, redislock.ErrNotObtained) && !errors.As(err, &ne) && !errors.Is(err, redislock.ErrGrantExpired) &&
						!(ended && errors.Is(err, context.DeadlineExceeded)), "unnamed error: %v", err)
					failures.Add(1)
					continue
				}
				assert.True(t, holders[k].CompareAndSwap(0, int32(w+1)), "key %d granted while held by worker %d", k, holders[k].Load()-1)
				grants.Add(1)
				holders[k].Store(0)
				if err := l.Release(ctx); err != nil && !errors.Is(err, redislock.ErrNotHeld) {
					var ne *redislock.NodeError
					assert.ErrorAs(t, err, &ne, "unnamed release error")
					mu.Lock()
					unreleased[redislock.LockKey("fault-"+strconv.Itoa(k))] = true // reported: it may stay until its TTL
					mu.Unlock()
				}
			}
		})
	}
	deadline, _ := ctx.Deadline()
	// progress waits until n more grants (or failures) have been counted.
	progress := func(what string, count *atomic.Int64, n int64) {
		t.Helper()
		from := count.Load()
		require.Eventually(t, func() bool { return count.Load() >= from+n }, time.Until(deadline), 5*time.Millisecond, what)
	}
	progress("grants through the auto-pipeliner", &grants, 200)
	// Writes paused until Obtain contexts (2 s) end during the pause;
	// every connection cut in the middle of the pause, with calls held
	// there, and after it, with calls going on.
	admin.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE")
	require.Eventually(t, func() bool {
		return infoField(admin, "clients", "blocked_clients") > 0
	}, time.Until(deadline), 5*time.Millisecond, "calls held by the pause")
	admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
	progress("calls ended by their ctx during the pause", &failures, 64)
	admin.Do(ctx, "CLIENT", "UNPAUSE")
	progress("grants after the pause", &grants, 64)
	admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
	progress("grants after the second cut", &grants, 64)
	close(stop)
	wg.Wait()
	_ = c.Close()
	require.True(t, redislock.Pipelined(c), "the auto-pipeliner was never used: the test exercised nothing")
	require.NotEqual(t, int64(0), grants.Load(), "no grants")
	left, err := admin.Keys(context.Background(), redislock.DefaultPrefix+"{fault-*}").Result()
	require.NoError(t, err)
	for _, k := range left {
		v := admin.Get(context.Background(), k).Val()
		assert.False(t, !unreleased[k] && !strings.HasPrefix(v, "~:"), "%s still locked after Close, though no Release of it failed", k)
	}
	t.Logf("%d grants, %d failed attempts", grants.Load(), failures.Load())
}

// ObtainReleaseLoop runs rounds Obtain+Release pairs on each of workers
// goroutines, each on its own key (prefix-i), and checks that every grant
// succeeds, every release too, and that each key's fences increase.
func ObtainReleaseLoop(ctx context.Context, t *testing.T, c *redislock.Client, prefix string, workers, rounds int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			key := prefix + "-" + strconv.Itoa(w)
			var last int64
			for range rounds {
				l, err := c.Obtain(ctx, key, time.Minute)
				if !assert.NoError(t, err) {
					return
				}
				assert.Greater(t, l.Fence(), last, "fence after %d", last)
				last = l.Fence()
				if !assert.NoError(t, l.Release(ctx)) {
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestReplicasInvalid(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	ctx := testkit.Context(t)
	c := newClient(t, rdb)
	for _, opt := range []redislock.Option{redislock.WithReplicas(-1, time.Second), redislock.WithReplicas(1, 0),
		redislock.WithReplicas(1, time.Microsecond)} {
		_, err := c.Obtain(ctx, "k", time.Second, opt)
		assert.ErrorIs(t, err, redislock.ErrInvalidArgument, "Obtain, want ErrInvalidArgument")
	}
	_, err := c.ObtainMulti(ctx, []string{"a", "b"}, time.Second, redislock.WithReplicas(1, time.Second))
	assert.ErrorIs(t, err, redislock.ErrInvalidArgument, "ObtainMulti, want ErrInvalidArgument")
	_, err = redislock.NewQuorum([]redis.UniversalClient{rdb}, redislock.WithReplicas(1, time.Second))
	assert.ErrorIs(t, err, redislock.ErrInvalidArgument, "NewQuorum, want ErrInvalidArgument")
	// 0: off, whatever the timeout.
	l, err := c.Obtain(ctx, "k", time.Second, redislock.WithReplicas(0, 0))
	require.NoError(t, err)
	_ = l.Release(ctx)
}

// infoField is a numeric field of INFO section on rdb's server (-1 if
// absent).
func infoField(rdb *redis.Client, section, field string) int {
	for _, line := range strings.Split(rdb.Info(context.Background(), section).Val(), "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(v)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
