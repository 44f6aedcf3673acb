package redislockotel_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/extra/redislockotel"
)

func Example() {
	m := miniredis.NewMiniRedis() // any Redis; an embedded one keeps the example self-contained
	if err := m.Start(); err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()

	// In a program: the SDK's providers with exporters, often set as the
	// globals (otel.SetTracerProvider), which New uses by default.
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	obs, err := redislockotel.New(redislockotel.WithTracerProvider(tp), redislockotel.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	locker := redislock.New(rdb, redislock.WithObserver(obs))
	defer locker.Close()

	ctx, request := tp.Tracer("app").Start(context.Background(), "handle request")
	lock, err := locker.Obtain(ctx, "report", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	_ = lock.Release(ctx)
	request.End()

	for _, s := range spans.Ended() {
		fmt.Printf("%s (child of the request: %v)\n", s.Name(), s.Parent().SpanID() == request.SpanContext().SpanID())
	}
	// Output:
	// redislock.obtain (child of the request: true)
	// redislock.release (child of the request: true)
	// handle request (child of the request: false)
}
