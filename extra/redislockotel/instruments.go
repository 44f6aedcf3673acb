package redislockotel

import (
	"errors"

	"go.opentelemetry.io/otel/metric"

	"github.com/redislock-go/redislock/extra/internal/track"
)

// Instrument names. Durations are in seconds ("s"); counts carry an
// annotation unit ("{acquisition}"), as the OpenTelemetry conventions ask.
const (
	MetricAcquisitions  = "redislock.acquisitions"
	MetricAcquireDur    = "redislock.acquire.duration"
	MetricWaitDur       = "redislock.wait.duration"
	MetricWaits         = "redislock.waits"
	MetricWaiting       = "redislock.waiting"
	MetricHoldDur       = "redislock.hold.duration"
	MetricReleases      = "redislock.releases"
	MetricHeld          = "redislock.held"
	MetricExpirations   = "redislock.expirations"
	MetricRefreshes     = "redislock.refreshes"
	MetricRefreshDur    = "redislock.refresh.duration"
	MetricLosses        = "redislock.losses"
	MetricStaleOwner    = "redislock.stale_owner"
	MetricNodeFailures  = "redislock.node.failures"
	MetricResubscribed  = "redislock.resubscriptions"
	MetricCleanupFailed = "redislock.cleanup.failures"
)

func (o *Observer) instruments(m metric.Meter) error {
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string, buckets []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	c := o.cfg
	o.acquisitions = counter(MetricAcquisitions, "{acquisition}", "Obtain calls, by redislock.outcome: obtained, contended (held by another until the wait ended), error.")
	o.acquireDur = histogram(MetricAcquireDur, "Time from an Obtain call to its return, by redislock.outcome.", c.latency)
	o.waitDur = histogram(MetricWaitDur, "Time Obtain calls spent waiting for a held lock, by redislock.outcome.", c.wait)
	o.waits = counter(MetricWaits, "{wait}", "Obtain calls whose first attempt found the lock held and that waited: contention.")
	var err error
	o.waiting, err = m.Int64UpDownCounter(MetricWaiting, metric.WithUnit("{call}"), metric.WithDescription("Obtain calls waiting for a held lock now."))
	errs = append(errs, err)
	o.holdDur = histogram(MetricHoldDur, "Time from a grant's request to its Release, by redislock.result.", c.hold)
	o.releases = counter(MetricReleases, "{release}", "Release calls, by redislock.result: ok, not_held (the grant had already ended), error.")
	o.refreshes = counter(MetricRefreshes, "{refresh}", "Refreshes, by redislock.kind (renewal: by Run or lease.Hold; call) and redislock.result.")
	o.refreshDur = histogram(MetricRefreshDur, "Time a Refresh took, by redislock.kind.", c.latency)
	o.losses = counter(MetricLosses, "{lock}", "Locks that Run or lease.Hold lost while work ran under them, by redislock.reason: not_held, lease_expired.")
	o.stale = counter(MetricStaleOwner, "{event}", "A holder acting on a grant that had already ended, by redislock.op: refresh, release, write (a stale fence refused by the Store).")
	o.nodeFailures = counter(MetricNodeFailures, "{call}", "Failed calls to a Redis node, by redislock.node (its index) and redislock.op.")
	o.resubscribed = counter(MetricResubscribed, "{connection}", "Replaced pub/sub connections of notified waiting.")
	o.cleanups = counter(MetricCleanupFailed, "{release}", "Background releases that failed: such grants stay on Redis until their TTL.")
	o.held, err = m.Int64ObservableGauge(MetricHeld, metric.WithUnit("{lock}"), metric.WithDescription("Grants obtained and not yet released or past their lease."))
	errs = append(errs, err)
	o.expirations, err = m.Int64ObservableCounter(MetricExpirations, metric.WithUnit("{lock}"), metric.WithDescription("Grants that ended without a successful Release: the lease ran out, a Refresh or Release found the grant gone, or Run or Hold lost it."))
	errs = append(errs, err)
	errs = append(errs, o.patternInstruments(m, counter, histogram))
	if err := errors.Join(errs...); err != nil {
		return track.Invalid("redislockotel: %v", err)
	}
	o.reg, err = m.RegisterCallback(o.observe, o.held, o.expirations, o.semHeld)
	if err != nil {
		return track.Invalid("redislockotel: %v", err)
	}
	return nil
}
