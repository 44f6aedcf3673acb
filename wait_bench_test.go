package redislock_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// BenchmarkHandoff measures how long a hot lock stays free between one
// holder's Release and the next holder's grant, with 8 and 32 goroutines
// contending for one key, per waiting mode. Each goroutine holds the lock
// for 200µs, releases it and works 1 ms before contending again, so the next
// grant usually goes to a waiter. Every waiter uses the same retry strategy,
// ExponentialBackoff(5ms, 100ms); one op is one grant.
// Reported: p50 and p99 handoff latency, and Redis commands per grant (the
// load the waiting puts on the server).
//
//	REDISLOCK_REQUIRE_REDIS=1 go test -run '^$' -bench Handoff -benchtime 2000x
func BenchmarkHandoff(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(func(o *redis.Options) { o.PoolSize = 64 })
	for _, m := range waitModes {
		for _, g := range []int{8, 32} {
			b.Run(fmt.Sprintf("%s/g=%d", m.name, g), func(b *testing.B) {
				benchHandoff(b, rdb, g, m.opts)
			})
		}
	}
}

func benchHandoff(b *testing.B, rdb *redis.Client, goroutines int, opts []redislock.ClientOption) {
	c := redislock.New(rdb, opts...)
	defer c.Close()
	key := "bench-" + strings.ReplaceAll(b.Name(), "/", "-")
	retry := redislock.WithRetry(redislock.ExponentialBackoff(5*time.Millisecond, 100*time.Millisecond))
	ctx := context.Background()

	var (
		remaining   atomic.Int64
		lastRelease atomic.Int64 // ns since start; 0: none yet
		mu          sync.Mutex
		lat         = make([]time.Duration, 0, b.N)
		failed      atomic.Int64
	)
	remaining.Store(int64(b.N))
	start := time.Now()
	before := commandsProcessed(b, rdb)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for remaining.Add(-1) >= 0 {
				for {
					l, err := c.Obtain(ctx, key, time.Second, retry, redislock.WithMaxWait(10*time.Second))
					if err != nil {
						failed.Add(1)
						continue
					}
					got := time.Since(start)
					if r := lastRelease.Load(); r > 0 {
						mu.Lock()
						lat = append(lat, got-time.Duration(r))
						mu.Unlock()
					}
					// Sleeps: the holder's work and the caller's pause
					// before it asks again, the workload being measured.
					time.Sleep(200 * time.Microsecond)
					lastRelease.Store(int64(time.Since(start)))
					_ = l.Release(ctx)
					time.Sleep(time.Millisecond)
					break
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Logf("%d Obtain calls gave up after WithMaxWait", n)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(float64(commandsProcessed(b, rdb)-before)/float64(b.N), "cmds/op")
}

func commandsProcessed(b *testing.B, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "stats").Result()
	require.NoError(b, err)
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
