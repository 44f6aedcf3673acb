package redislockotel

import (
	"slices"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redislock-go/redislock/extra/internal/track"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/redislock-go/redislock/extra/redislockotel"

// Defaults, all in one place.
var (
	// DefaultLatencyBuckets are the bucket boundaries (s) of the acquire
	// and refresh durations: 25 µs to 10 s, three a decade, so that the
	// calls to a Redis nearby (50 µs to 0.5 ms) spread over several.
	DefaultLatencyBuckets = slices.Clone(track.LatencyBuckets)
	// DefaultWaitBuckets are the bucket boundaries (s) of the wait
	// duration: 1 ms to 5 min.
	DefaultWaitBuckets = slices.Clone(track.WaitBuckets)
	// DefaultHoldBuckets are the bucket boundaries (s) of the hold
	// duration: 10 ms to 1 h.
	DefaultHoldBuckets = slices.Clone(track.HoldBuckets)
)

// An Option configures an Observer.
type Option func(*config) error

type config struct {
	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	keyAttr        bool
	spanKeys       bool
	spans          bool
	latency        []float64
	wait           []float64
	hold           []float64
}

func defaults() config {
	return config{
		meterProvider:  otel.GetMeterProvider(),
		tracerProvider: otel.GetTracerProvider(),
		spanKeys:       true,
		spans:          true,
		latency:        DefaultLatencyBuckets,
		wait:           DefaultWaitBuckets,
		hold:           DefaultHoldBuckets,
	}
}

func (c *config) check() error {
	switch {
	case c.meterProvider == nil:
		return track.Invalid("redislockotel: nil MeterProvider")
	case c.tracerProvider == nil:
		return track.Invalid("redislockotel: nil TracerProvider")
	}
	for _, b := range [][]float64{c.latency, c.wait, c.hold} {
		if !track.Increasing(b) {
			return track.Invalid("redislockotel: buckets %v must be a non-empty, strictly increasing list", b)
		}
	}
	return nil
}

// WithMeterProvider sets where the metrics go. Default: the global one
// (otel.GetMeterProvider), as it is when New is called.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error { c.meterProvider = mp; return nil }
}

// WithTracerProvider sets where the spans go. Default: the global one
// (otel.GetTracerProvider), as it is when New is called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error { c.tracerProvider = tp; return nil }
}

// WithKeyAttribute adds the lock key (redislock.key) to the per-lock
// metrics. Default: off. Every key becomes a set of series that lives as
// long as the process: use it only when the keys are few and fixed, never
// for per-user or per-request keys. The semaphore and leader metrics then
// carry the semaphore's or election's name; node, dedup and stampede
// metrics never carry it.
func WithKeyAttribute() Option {
	return func(c *config) error { c.keyAttr = true; return nil }
}

// WithoutSpanKeys leaves the lock key out of the spans (by default they
// carry it as redislock.key: a trace is one request's, so a key there costs
// no cardinality; leave it out when keys are sensitive).
func WithoutSpanKeys() Option {
	return func(c *config) error { c.spanKeys = false; return nil }
}

// WithoutSpans records metrics only.
func WithoutSpans() Option {
	return func(c *config) error { c.spans = false; return nil }
}

// WithLatencyBuckets sets the bucket boundaries (s) of
// redislock.acquire.duration and redislock.refresh.duration.
func WithLatencyBuckets(b ...float64) Option {
	return func(c *config) error { c.latency = b; return nil }
}

// WithWaitBuckets sets the bucket boundaries (s) of redislock.wait.duration.
func WithWaitBuckets(b ...float64) Option {
	return func(c *config) error { c.wait = b; return nil }
}

// WithHoldBuckets sets the bucket boundaries (s) of redislock.hold.duration.
func WithHoldBuckets(b ...float64) Option {
	return func(c *config) error { c.hold = b; return nil }
}
