package dedup_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/dedup"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/lease"
)

// Deduplication on real redis-servers: each worker has its own Client on
// its own connections, as separate processes would.

// slowReplies gives a reply 5 s, not redistest's 1 s: on a loaded machine
// a reply can take longer than a second, and go-redis retries a command
// that timed out, so that a reply late past a second turns into a retry
// storm (and, for the job's INCR, a second side effect made by the test's
// own transport, not by the job running twice).
func slowReplies(o *redis.Options) {
	o.ReadTimeout, o.WriteTimeout = 5*time.Second, 5*time.Second
}

func redisWorkers(t *testing.T, srvs []*redistest.Server, n int, opts ...dedup.Option) []*dedup.Group {
	t.Helper()
	gs := make([]*dedup.Group, n)
	for i := range gs {
		var rdbs []redis.UniversalClient
		for _, s := range srvs {
			rdbs = append(rdbs, s.Client(slowReplies))
		}
		// Bounds far from what a loaded machine does to a call (the
		// defaults: a 3 s release, in quorum mode a 1 s node timeout for
		// the 10 s lease): the jobs' exactly-once is tested, not them.
		bounds := []redislock.ClientOption{redislock.WithReleaseTimeout(10 * time.Second), redislock.WithNodeTimeout(10 * time.Second)}
		var c *redislock.Client
		if len(rdbs) == 1 {
			c = redislock.New(rdbs[0], bounds...)
		} else {
			var err error
			if c, err = redislock.NewQuorum(rdbs, bounds...); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { _ = c.Close() })
		g, err := dedup.New(c.Locker(), c.Store(), append([]dedup.Option{dedup.WithHolder(fmt.Sprintf("w%d", i))}, opts...)...)
		require.NoError(t, err)
		gs[i] = g
	}
	return gs
}

// Eight workers, 1,000 jobs, each delivered three times: every job's side
// effect (an INCR in Redis, made by the job) happens exactly once.
func TestWorkerPoolRedis(t *testing.T) {
	t.Parallel()
	for _, wait := range []bool{false, true} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			srv := redistest.Start(t)
			var opts []dedup.Option
			if wait {
				opts = append(opts, dedup.WithRetry(lease.LinearBackoff(100*time.Millisecond)))
			}
			workers := redisWorkers(t, []*redistest.Server{srv}, 8, opts...)
			poolWithEffects(t, srv, workers, 1000, 3)
		})
	}
}

// Quorum mode on three servers, with fewer jobs.
func TestWorkerPoolQuorum(t *testing.T) {
	t.Parallel()
	srvs := redistest.StartN(t, 3)
	workers := redisWorkers(t, srvs, 4, dedup.WithRetry(lease.LinearBackoff(20*time.Millisecond)))
	poolWithEffects(t, srvs[0], workers, 200, 3)
}

// poolWithEffects runs pool with jobs whose side effect is an INCR of
// "effect:<id>" on srv, and checks that each counter is 1.
func poolWithEffects(t *testing.T, srv *redistest.Server, workers []*dedup.Group, jobs, deliveries int) {
	t.Helper()
	// The side effect is made once per run: never retried by go-redis.
	rdb := srv.Client(func(o *redis.Options) { slowReplies(o); o.MaxRetries = -1 })
	start := time.Now()
	pool(t, workers, jobs, deliveries, func(ctx context.Context, id string) error {
		return rdb.Incr(ctx, "effect:"+id).Err()
	})
	t.Logf("%v for %d deliveries on %d workers", time.Since(start).Round(time.Millisecond), jobs*deliveries, len(workers))
	ctx := ctxFor(t)
	for i := range jobs {
		id := fmt.Sprintf("job-%d", i)
		if n, err := rdb.Get(ctx, "effect:"+id).Int(); err != nil || n != 1 {
			t.Errorf("%s: side effect happened %d times (%v)", id, n, err)
		}
	}
}
