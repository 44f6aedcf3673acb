package redislockprom

import (
	"regexp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redislock-go/redislock/extra/internal/track"
)

// Defaults, all in one place.
var (
	// DefaultNamespace is the prefix of every metric name.
	DefaultNamespace = "redislock"
	// DefaultLatencyBuckets are the buckets (seconds) of the acquire and
	// refresh durations: 25 µs to 10 s, three a decade, so that the calls
	// to a Redis nearby (50 µs to 0.5 ms) spread over several.
	DefaultLatencyBuckets = slices.Clone(track.LatencyBuckets)
	// DefaultWaitBuckets are the buckets (seconds) of the wait duration:
	// 1 ms to 5 min.
	DefaultWaitBuckets = slices.Clone(track.WaitBuckets)
	// DefaultHoldBuckets are the buckets (seconds) of the hold duration:
	// 10 ms to 1 h.
	DefaultHoldBuckets = slices.Clone(track.HoldBuckets)
)

// An Option configures a Collector.
type Option func(*config) error

type config struct {
	namespace   string
	keyLabel    bool
	constLabels prometheus.Labels
	latency     []float64
	wait        []float64
	hold        []float64
}

func defaults() config {
	return config{
		namespace: DefaultNamespace,
		latency:   DefaultLatencyBuckets,
		wait:      DefaultWaitBuckets,
		hold:      DefaultHoldBuckets,
	}
}

var nameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

func (c *config) check() error {
	if c.namespace != "" && !nameRE.MatchString(c.namespace) {
		return track.Invalid("redislockprom: namespace %q is not a valid metric name prefix", c.namespace)
	}
	for _, b := range [][]float64{c.latency, c.wait, c.hold} {
		if !track.Increasing(b) {
			return track.Invalid("redislockprom: buckets %v must be a non-empty, strictly increasing list", b)
		}
	}
	for name := range c.constLabels {
		if name == "key" || !nameRE.MatchString(name) {
			return track.Invalid("redislockprom: constant label %q is not allowed", name)
		}
	}
	return nil
}

// WithNamespace sets the prefix of the metric names. Default "redislock"
// (redislock_acquisitions_total, ...); "" leaves the names bare.
func WithNamespace(ns string) Option {
	return func(c *config) error { c.namespace = ns; return nil }
}

// WithKeyLabel adds the lock key as a label "key" to the per-lock metrics.
// Default: off. Every key becomes a set of series that lives as long as the
// process: use it only when the keys are few and fixed (a handful of cron
// jobs, say), never for per-user or per-request keys. The semaphore and
// leader metrics then carry the semaphore's or election's name as "key";
// node, subscription, dedup and stampede metrics never carry it.
func WithKeyLabel() Option {
	return func(c *config) error { c.keyLabel = true; return nil }
}

// WithConstLabels adds labels with fixed values to every metric (an
// application or client name, say). "key" is reserved.
func WithConstLabels(l prometheus.Labels) Option {
	return func(c *config) error { c.constLabels = l; return nil }
}

// WithLatencyBuckets sets the buckets, in seconds, of
// redislock_acquire_duration_seconds and redislock_refresh_duration_seconds.
// Default DefaultLatencyBuckets.
func WithLatencyBuckets(b ...float64) Option {
	return func(c *config) error { c.latency = b; return nil }
}

// WithWaitBuckets sets the buckets, in seconds, of
// redislock_wait_duration_seconds. Default DefaultWaitBuckets.
func WithWaitBuckets(b ...float64) Option {
	return func(c *config) error { c.wait = b; return nil }
}

// WithHoldBuckets sets the buckets, in seconds, of
// redislock_hold_duration_seconds. Default DefaultHoldBuckets.
func WithHoldBuckets(b ...float64) Option {
	return func(c *config) error { c.hold = b; return nil }
}
