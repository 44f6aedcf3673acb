package redislockprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/extra/redislockprom"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/observe"
)

// The cost of the Collector on the uncontended Obtain+Release pair, against
// a redis-server the benchmark starts (compare the two with benchstat):
//
//	go test -run '^$' -bench ObtainRelease -count 10
func BenchmarkObtainRelease(b *testing.B) {
	srv := redistest.Start(b)
	for _, bc := range []struct {
		name string
		opts func(b *testing.B) []redislock.ClientOption
	}{
		{"observer=none", func(*testing.B) []redislock.ClientOption { return nil }},
		{"observer=prometheus", func(b *testing.B) []redislock.ClientOption {
			col, err := redislockprom.New()
			require.NoError(b, err)
			reg := prometheus.NewRegistry()
			reg.MustRegister(col)
			b.Cleanup(func() { reportResolution(b, reg) })
			return []redislock.ClientOption{redislock.WithObserver(col)}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := redislock.New(srv.Client(nil), bc.opts(b)...)
			defer c.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l, err := c.Obtain(ctx, "bench", time.Second)
				require.NoError(b, err)
				require.NoError(b, l.Release(ctx))
			}
		})
	}
}

// The Collector's own CPU cost for the events of one uncontended
// Obtain+Release pair (what the Client calls), without Redis: the
// numerator of its overhead on BenchmarkObtainRelease.
func BenchmarkEvents(b *testing.B) {
	col, err := redislockprom.New()
	require.NoError(b, err)
	prometheus.NewRegistry().MustRegister(col)
	ctx := context.Background()
	b.ReportAllocs()
	var fence int64
	for b.Loop() {
		fence++
		octx := col.ObtainStart(ctx, observe.ObtainStartEvent{Key: "bench", TTL: time.Second})
		col.ObtainDone(octx, observe.ObtainDoneEvent{Key: "bench", TTL: time.Second, Fence: fence, Attempts: 1, Wait: 50 * time.Microsecond})
		rctx := col.ReleaseStart(ctx, observe.ReleaseStartEvent{Key: "bench", Fence: fence})
		col.ReleaseDone(rctx, observe.ReleaseDoneEvent{Key: "bench", Fence: fence, Held: 60 * time.Microsecond})
	}
}

// reportResolution reports how well the default latency buckets resolve
// the benchmark's Obtain calls: the share of them in the lowest bucket
// (first-bucket-%) and the upper bound of the bucket that holds the median
// (p50-bucket-µs).
func reportResolution(b *testing.B, reg *prometheus.Registry) {
	mfs, err := reg.Gather()
	require.NoError(b, err)
	for _, mf := range mfs {
		if mf.GetName() != "redislock_acquire_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			n := float64(h.GetSampleCount())
			if n == 0 {
				continue
			}
			bs := h.GetBucket()
			b.ReportMetric(100*float64(bs[0].GetCumulativeCount())/n, "first-bucket-%")
			for _, bk := range bs {
				if float64(bk.GetCumulativeCount()) >= n/2 {
					b.ReportMetric(bk.GetUpperBound()*1e6, "p50-bucket-µs")
					break
				}
			}
		}
	}
}
