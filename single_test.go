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
			if err != nil {
				t.Fatal(err)
			}
			if err := lone.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if redislock.Pipelined(c) {
				t.Fatal("a lone call set up auto-pipelining")
			}
			ObtainReleaseLoop(ctx, t, c, "ap-"+strconv.FormatBool(on), 64, 50)
			if used := redislock.Pipelined(c); used != on {
				t.Fatalf("auto-pipeliner in use: %v, want %v", used, on)
			}
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
					if !errors.Is(err, redislock.ErrNotObtained) && !errors.As(err, &ne) && !errors.Is(err, redislock.ErrGrantExpired) &&
						!(ended && errors.Is(err, context.DeadlineExceeded)) {
						t.Errorf("unnamed error: %v", err)
					}
					failures.Add(1)
					continue
				}
				if !holders[k].CompareAndSwap(0, int32(w+1)) {
					t.Errorf("key %d granted while held by worker %d", k, holders[k].Load()-1)
				}
				grants.Add(1)
				holders[k].Store(0)
				if err := l.Release(ctx); err != nil && !errors.Is(err, redislock.ErrNotHeld) {
					var ne *redislock.NodeError
					if !errors.As(err, &ne) {
						t.Errorf("unnamed release error: %v", err)
					}
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
		eventually(t, time.Until(deadline), what, func() bool { return count.Load() >= from+n })
	}
	progress("grants through the auto-pipeliner", &grants, 200)
	// Writes paused until Obtain contexts (2 s) end during the pause;
	// every connection cut in the middle of the pause, with calls held
	// there, and after it, with calls going on.
	admin.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE")
	eventually(t, time.Until(deadline), "calls held by the pause", func() bool {
		return infoField(admin, "clients", "blocked_clients") > 0
	})
	admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
	progress("calls ended by their ctx during the pause", &failures, 64)
	admin.Do(ctx, "CLIENT", "UNPAUSE")
	progress("grants after the pause", &grants, 64)
	admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
	progress("grants after the second cut", &grants, 64)
	close(stop)
	wg.Wait()
	_ = c.Close()
	if !redislock.Pipelined(c) {
		t.Fatal("the auto-pipeliner was never used: the test exercised nothing")
	}
	if grants.Load() == 0 {
		t.Fatal("no grants")
	}
	left, err := admin.Keys(context.Background(), redislock.DefaultPrefix+"{fault-*}").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range left {
		if v := admin.Get(context.Background(), k).Val(); !unreleased[k] && !strings.HasPrefix(v, "~:") {
			t.Errorf("%s still locked after Close, though no Release of it failed", k)
		}
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
				if err != nil {
					t.Error(err)
					return
				}
				if l.Fence() <= last {
					t.Errorf("fence %d after %d", l.Fence(), last)
				}
				last = l.Fence()
				if err := l.Release(ctx); err != nil {
					t.Error(err)
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
	ctx := ctxT(t, 5*time.Second)
	c := newClient(t, rdb)
	for _, opt := range []redislock.Option{redislock.WithReplicas(-1, time.Second), redislock.WithReplicas(1, 0),
		redislock.WithReplicas(1, time.Microsecond)} {
		if _, err := c.Obtain(ctx, "k", time.Second, opt); !errors.Is(err, redislock.ErrInvalidArgument) {
			t.Errorf("Obtain = %v, want ErrInvalidArgument", err)
		}
	}
	if _, err := c.ObtainMulti(ctx, []string{"a", "b"}, time.Second, redislock.WithReplicas(1, time.Second)); !errors.Is(err, redislock.ErrInvalidArgument) {
		t.Errorf("ObtainMulti = %v, want ErrInvalidArgument", err)
	}
	if _, err := redislock.NewQuorum([]redis.UniversalClient{rdb}, redislock.WithReplicas(1, time.Second)); !errors.Is(err, redislock.ErrInvalidArgument) {
		t.Errorf("NewQuorum = %v, want ErrInvalidArgument", err)
	}
	// 0: off, whatever the timeout.
	l, err := c.Obtain(ctx, "k", time.Second, redislock.WithReplicas(0, 0))
	if err != nil {
		t.Fatal(err)
	}
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
