package renew

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease"
)

// The benchmarks hold 100,000 entries with a TTL of 10 s (renewed every
// 3.33 s) for three rounds and report, per run (use -benchtime=1x):
//
//	goroutines       the most goroutines the Renewer ran at once
//	heap-B/entry     heap bytes per entry, beyond the caller's keys and tokens
//	calls/round      BatchFunc calls per renewal round
//	entries/call     requests per call
//	lag-p99-ms       99th percentile of (renewal confirmed - renewal due)
//	lag-p99/TTL      the same as a share of the TTL (target <= 0.1)
//
// BenchmarkRenew100k/memory answers in memory (the machine's own cost);
// /redis-server runs batch_refresh.lua on a local redis-server, which also
// deletes 100 keys behind their holders' backs and reports how long the
// loss took to reach them (loss-max-ms, target <= one interval).
const (
	benchEntries = 100_000
	benchTTL     = 10 * time.Second
	benchRounds  = 3
)

func BenchmarkRenew100k(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		benchRenew(b, func(context.Context, Group, []Request) ([]Result, error) {
			return nil, nil // filled in by the wrapper: all renewed
		}, nil)
	})
	b.Run("redis-server", func(b *testing.B) {
		srv := redistest.Start(b)
		rdb := srv.Client(func(o *redis.Options) { o.PoolSize = 2 * DefaultPerNode })
		benchRenew(b, func(ctx context.Context, g Group, reqs []Request) ([]Result, error) {
			keys, tokens := make([]string, len(reqs)), make([]string, len(reqs))
			for i, r := range reqs {
				keys[i], tokens[i] = r.Key, r.Token
			}
			st, err := script.BatchRefresh(ctx, rdb, keys, tokens, reqs[0].TTL.Milliseconds(), make([]script.BatchStatus, 0, len(reqs)))
			if err != nil {
				return nil, err
			}
			res := make([]Result, len(st))
			for i, s := range st {
				res[i].Renewed = s == script.BatchRenewed
			}
			return res, nil
		}, rdb)
	})
}

// benchRenew runs the benchmark with batch; with rdb, the lock keys are
// written there first and 100 of them deleted in the second round.
func benchRenew(b *testing.B, batch BatchFunc, rdb *redis.Client) {
	ctx := context.Background()
	keys, tokens := make([]string, benchEntries), make([]string, benchEntries)
	for i := range keys {
		keys[i], tokens[i] = fmt.Sprintf("redislock:{bench-%d}", i), fmt.Sprintf("tok%d", i)
	}
	if rdb != nil {
		for i := 0; i < benchEntries; i += 1000 {
			pipe := rdb.Pipeline()
			for j := i; j < i+1000; j++ {
				pipe.Set(ctx, keys[j], tokens[j]+":1", benchTTL)
			}
			_, err := pipe.Exec(ctx)
			require.NoError(b, err)
		}
	}
	var (
		mu      sync.Mutex
		lags    []time.Duration
		calls   atomic.Int64
		measure atomic.Bool // in the measured rounds
		peak    atomic.Int64
		served  atomic.Int64             // requests answered, in every round
		served1 = make(chan struct{}, 1) // a call was answered
	)
	baseGoroutines := runtime.NumGoroutine()
	wrapped := func(ctx context.Context, g Group, reqs []Request) ([]Result, error) {
		if n := int64(runtime.NumGoroutine() - baseGoroutines); n > peak.Load() {
			peak.Store(n)
		}
		res, err := batch(ctx, g, reqs)
		if err == nil && res == nil {
			res = make([]Result, len(reqs))
			for i := range res {
				res[i].Renewed = true
			}
		}
		served.Add(int64(len(reqs)))
		select {
		case served1 <- struct{}{}:
		default:
		}
		if measure.Load() {
			now := time.Now()
			calls.Add(1)
			mu.Lock()
			for _, r := range reqs {
				lags = append(lags, max(now.Sub(r.Due), 0))
			}
			mu.Unlock()
		}
		return res, err
	}
	r, err := New(Config{Batch: wrapped})
	require.NoError(b, err)
	defer r.Close()
	interval := benchTTL / 3
	drift := lease.Drift(benchTTL, lease.DefaultDriftFactor)
	// The caller's own: keys, tokens, callbacks and handles, made before
	// the heap is measured.
	lostAt := make([]atomic.Int64, benchEntries) // unix ns of a reported loss
	losts := make([]func(error), benchEntries)
	for i := range losts {
		losts[i] = lostFunc(&lostAt[i])
	}
	renewed := func(time.Time) {}
	handles := make([]*Handle, benchEntries)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := range keys {
		h, err := r.Add(Entry{Group: Group{Node: "local"}, Key: keys[i], Token: tokens[i], TTL: benchTTL, Interval: interval, Drift: drift,
			ValidUntil: time.Now().Add(benchTTL - drift), Renewed: renewed, Lost: losts[i]})
		require.NoError(b, err)
		handles[i] = h
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perEntry := float64(after.HeapAlloc-before.HeapAlloc) / benchEntries

	// rounds waits until the entries were renewed n more times, in all.
	rounds := func(n float64) {
		for target := served.Load() + int64(n*benchEntries); served.Load() < target; {
			<-served1
		}
	}
	rounds(1) // round 1: the entries fall into step
	measure.Store(true)
	var deleted time.Time
	if rdb != nil {
		rounds(0.5)
		deleted = time.Now()
		pipe := rdb.Pipeline()
		for i := range 100 {
			pipe.Del(ctx, keys[i*1000])
		}
		_, err := pipe.Exec(ctx)
		require.NoError(b, err)
		rounds(benchRounds - 0.5)
		for i := range 100 { // reported at the deleted keys' next renewal
			for lostAt[i*1000].Load() == 0 {
				select {
				case <-served1:
				case <-time.After(2 * interval):
					require.Failf(b, "loss not reported", "the loss of deleted key %d was not reported", i*1000)
				}
			}
		}
	} else {
		rounds(benchRounds)
	}
	measure.Store(false)
	b.StopTimer()

	mu.Lock()
	slices.Sort(lags)
	p99 := lags[len(lags)*99/100]
	n := len(lags)
	mu.Unlock()
	b.ReportMetric(float64(peak.Load()), "goroutines")
	b.ReportMetric(perEntry, "heap-B/entry")
	b.ReportMetric(float64(calls.Load())/benchRounds, "calls/round")
	b.ReportMetric(float64(n)/float64(calls.Load()), "entries/call")
	b.ReportMetric(float64(p99)/float64(time.Millisecond), "lag-p99-ms")
	b.ReportMetric(float64(p99)/float64(benchTTL), "lag-p99/TTL")
	if rdb != nil {
		var worst time.Duration
		for i := range 100 {
			at := lostAt[i*1000].Load()
			worst = max(worst, time.Unix(0, at).Sub(deleted))
		}
		b.ReportMetric(float64(worst)/float64(time.Millisecond), "loss-max-ms")
	}
	for _, h := range handles {
		h.Stop()
	}
}

func lostFunc(at *atomic.Int64) func(error) {
	return func(error) { at.Store(time.Now().UnixNano()) }
}
