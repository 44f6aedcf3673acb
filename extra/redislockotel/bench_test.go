package redislockotel_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/extra/redislockotel"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/observe"
)

// The cost of the Observer on the uncontended Obtain+Release pair, against
// a redis-server the benchmark starts (compare with benchstat):
//
//	go test -run '^$' -bench ObtainRelease -count 10
//
// metrics: the SDK's MeterProvider with a reader; spans: also the SDK's
// TracerProvider, sampling every span, with no exporter.
func BenchmarkObtainRelease(b *testing.B) {
	srv := redistest.Start(b)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	for _, bc := range []struct {
		name string
		opts []redislockotel.Option
	}{
		{"observer=none", nil},
		{"observer=otel-metrics", []redislockotel.Option{redislockotel.WithMeterProvider(mp), redislockotel.WithoutSpans()}},
		{"observer=otel-spans", []redislockotel.Option{redislockotel.WithMeterProvider(mp), redislockotel.WithTracerProvider(tp)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var copts []redislock.ClientOption
			if bc.opts != nil {
				obs, err := redislockotel.New(bc.opts...)
				require.NoError(b, err)
				defer obs.Shutdown()
				copts = append(copts, redislock.WithObserver(obs))
			}
			c := redislock.New(srv.Client(nil), copts...)
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

// The Observer's own CPU cost for the events of one uncontended
// Obtain+Release pair (what the Client calls), without Redis: the
// numerator of its overhead on BenchmarkObtainRelease.
func BenchmarkEvents(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	for _, bc := range []struct {
		name string
		opts []redislockotel.Option
	}{
		{"metrics", []redislockotel.Option{redislockotel.WithMeterProvider(mp), redislockotel.WithoutSpans()}},
		{"metrics+spans", []redislockotel.Option{redislockotel.WithMeterProvider(mp), redislockotel.WithTracerProvider(tp)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			obs, err := redislockotel.New(bc.opts...)
			require.NoError(b, err)
			defer obs.Shutdown()
			ctx := context.Background()
			b.ReportAllocs()
			var fence int64
			for b.Loop() {
				fence++
				octx := obs.ObtainStart(ctx, observe.ObtainStartEvent{Key: "bench", TTL: time.Second})
				obs.ObtainDone(octx, observe.ObtainDoneEvent{Key: "bench", TTL: time.Second, Fence: fence, Attempts: 1, Wait: 50 * time.Microsecond})
				rctx := obs.ReleaseStart(ctx, observe.ReleaseStartEvent{Key: "bench", Fence: fence})
				obs.ReleaseDone(rctx, observe.ReleaseDoneEvent{Key: "bench", Fence: fence, Held: 60 * time.Microsecond})
			}
		})
	}
}
