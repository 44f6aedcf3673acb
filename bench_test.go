package redislock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Benchmarks run against redis-server processes they start themselves:
//
//	go test -run '^$' -bench . -benchmem

func benchClient(b *testing.B, nodes int) *redislock.Client {
	b.Helper()
	if nodes == 1 {
		return newClient(b, redistest.Start(b).Client(nil))
	}
	return benchQuorum(b, nodes, nil)
}

// benchQuorum is a quorum Client of nodes servers, their go-redis
// options adjusted by fn (may be nil).
func benchQuorum(b *testing.B, nodes int, fn func(*redis.Options)) *redislock.Client {
	b.Helper()
	var rdbs []redis.UniversalClient
	for _, s := range redistest.StartN(b, nodes) {
		rdbs = append(rdbs, s.Client(fn))
	}
	c, err := redislock.NewQuorum(rdbs)
	require.NoError(b, err)
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func benchObtainRelease(b *testing.B, nodes int, ctx context.Context) {
	loopObtainRelease(b, benchClient(b, nodes), ctx)
}

func loopObtainRelease(b *testing.B, c *redislock.Client, ctx context.Context) {
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.Obtain(ctx, "bench", time.Second)
		require.NoError(b, err)
		require.NoError(b, l.Release(ctx))
	}
}

func BenchmarkObtainRelease(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) { benchObtainRelease(b, n, context.Background()) })
	}
	// A ctx that can end, as a request's: the calls are bounded by it
	// whatever go-redis' options (ContextTimeoutEnabled is off here).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Run("nodes=1/ctx=cancellable", func(b *testing.B) { benchObtainRelease(b, 1, ctx) })
	dctx, dcancel := context.WithTimeout(context.Background(), time.Hour)
	defer dcancel()
	b.Run("nodes=1/ctx=deadline", func(b *testing.B) { benchObtainRelease(b, 1, dctx) })
	// go-redis as the README configures it: ContextTimeoutEnabled, so the
	// calls run on the caller's goroutine with the timeout as a deadline.
	ctxTimeout := func(o *redis.Options) { o.ContextTimeoutEnabled = true }
	for _, ctx := range []struct {
		name string
		ctx  context.Context
	}{{"background", context.Background()}, {"deadline", dctx}} {
		b.Run("nodes=1/ContextTimeoutEnabled/ctx="+ctx.name, func(b *testing.B) {
			loopObtainRelease(b, newClient(b, redistest.Start(b).Client(ctxTimeout)), ctx.ctx)
		})
	}
	b.Run("nodes=3/ContextTimeoutEnabled", func(b *testing.B) {
		loopObtainRelease(b, benchQuorum(b, 3, ctxTimeout), context.Background())
	})
}

// Each goroutine locks keys of its own: throughput without contention.
func BenchmarkObtainReleaseParallel(b *testing.B) {
	c := benchClient(b, 1)
	ctx := context.Background()
	var id atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := "par:" + strconv.FormatInt(id.Add(1), 10)
		for pb.Next() {
			l, err := c.Obtain(ctx, key, time.Second)
			if !assert.NoError(b, err) || !assert.NoError(b, l.Release(ctx)) {
				return
			}
		}
	})
}

func BenchmarkRefresh(b *testing.B) {
	c := benchClient(b, 1)
	ctx := context.Background()
	l, err := c.Obtain(ctx, "refresh", time.Minute)
	require.NoError(b, err)
	defer l.Release(ctx)
	b.ReportAllocs()
	for b.Loop() {
		require.NoError(b, l.Refresh(ctx, time.Minute))
	}
}

// Run's overhead over Obtain+Release: the renewal goroutine and timers.
func BenchmarkRun(b *testing.B) {
	c := benchClient(b, 1)
	ctx := context.Background()
	fn := func(context.Context, *redislock.Lock) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		require.NoError(b, c.Run(ctx, "run", time.Second, fn))
	}
}
