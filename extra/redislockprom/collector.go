package redislockprom

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redislock-go/redislock/extra/internal/track"
	"github.com/redislock-go/redislock/observe"
)

// Collector is a redislock Observer and a prometheus.Collector: give it to
// redislock.New (or NewQuorum) with redislock.WithObserver and register it
// with a prometheus.Registerer. One Collector may observe several Clients;
// their events add up. Its methods are safe for concurrent use.
type Collector struct {
	cfg    config
	grants *track.Grants
	calls  *track.Key

	acquisitions *prometheus.CounterVec
	acquireDur   *prometheus.HistogramVec
	waitDur      *prometheus.HistogramVec
	waits        *prometheus.CounterVec
	waiting      *prometheus.GaugeVec
	holdDur      *prometheus.HistogramVec
	releases     *prometheus.CounterVec
	expirations  *prometheus.CounterVec
	refreshes    *prometheus.CounterVec
	refreshDur   *prometheus.HistogramVec
	losses       *prometheus.CounterVec
	stale        *prometheus.CounterVec
	nodeFailures *prometheus.CounterVec
	nodeLastFail *prometheus.GaugeVec
	resubscribed prometheus.Counter
	cleanups     prometheus.Counter
	held         *prometheus.Desc
	patterns

	// Children of the label sets without key, made once so that the hot
	// path does not hash label values.
	byOutcome map[observe.Outcome]outcomeMetrics
	byResult  map[string]resultMetrics
}

type resultMetrics struct {
	releases prometheus.Counter
	holdDur  prometheus.Observer
}

type outcomeMetrics struct {
	acquisitions prometheus.Counter
	acquireDur   prometheus.Observer
	waitDur      prometheus.Observer
}

var (
	_ prometheus.Collector         = (*Collector)(nil)
	_ observe.ObtainObserver       = (*Collector)(nil)
	_ observe.WaitObserver         = (*Collector)(nil)
	_ observe.RefreshObserver      = (*Collector)(nil)
	_ observe.ReleaseObserver      = (*Collector)(nil)
	_ observe.LossObserver         = (*Collector)(nil)
	_ observe.NodeObserver         = (*Collector)(nil)
	_ observe.SubscriptionObserver = (*Collector)(nil)
	_ observe.CleanupObserver      = (*Collector)(nil)
	_ observe.StaleFenceObserver   = (*Collector)(nil)
)

// New returns a Collector. Invalid options (an empty bucket list, buckets
// not increasing, a namespace that is not a valid metric name prefix) are
// errors matching lease.ErrInvalidArgument.
func New(opts ...Option) (*Collector, error) {
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c := &Collector{cfg: cfg, calls: track.NewKey()}
	m := maker{cfg}
	key, counter, histogram, gauge := m.key, m.counter, m.histogram, m.gauge
	ns, cl := cfg.namespace, cfg.constLabels
	c.acquisitions = counter("acquisitions_total",
		"Obtain calls by outcome: obtained, contended (held by another until the wait ended), error.", key("outcome")...)
	c.acquireDur = histogram("acquire_duration_seconds",
		"Time from an Obtain call to its return, by outcome.", cfg.latency, key("outcome")...)
	c.waitDur = histogram("wait_duration_seconds",
		"Time Obtain calls spent waiting for a held lock: from the first attempt that found it held to the return, by outcome.", cfg.wait, key("outcome")...)
	c.waits = counter("waits_total",
		"Obtain calls whose first attempt found the lock held and that waited: contention.", key()...)
	c.waiting = gauge("waiting_calls",
		"Obtain calls waiting for a held lock now.", key()...)
	c.holdDur = histogram("hold_duration_seconds",
		"Time from a grant's request to its Release, by the Release's result.", cfg.hold, key("result")...)
	c.releases = counter("releases_total",
		"Release calls by result: ok, not_held (the grant had already ended), error.", key("result")...)
	c.expirations = counter("expirations_total",
		"Grants that ended without a successful Release: the lease ran out, a Refresh or Release found the grant gone, or Run or Hold lost it.", key()...)
	c.refreshes = counter("refreshes_total",
		"Refreshes by kind (renewal: by Run or lease.Hold; call: Lock.Refresh) and result (ok, not_held, error). Failed renewals are kind=\"renewal\", result!=\"ok\".", key("kind", "result")...)
	c.refreshDur = histogram("refresh_duration_seconds",
		"Time a Refresh took, by kind.", cfg.latency, key("kind")...)
	c.losses = counter("locks_lost_total",
		"Locks that Run or lease.Hold lost while work ran under them, by reason: not_held (a renewal found the lock gone), lease_expired (no renewal got through before its validity ended).", key("reason")...)
	c.stale = counter("stale_owner_total",
		"A holder acting on a grant that had already ended, by op: refresh or release that found it gone, write refused by the Store for a stale fence.", key("op")...)
	c.nodeFailures = counter("node_failures_total",
		"Failed calls to a Redis node, by node index (its place in the list given to NewQuorum; 0 in single mode) and op.", "node", "op")
	c.nodeLastFail = gauge("node_last_failure_timestamp_seconds",
		"Unix time of the last failed call to each Redis node.", "node")
	c.resubscribed = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "resubscriptions_total", ConstLabels: cl,
		Help: "Times the pub/sub connection of notified waiting failed and was replaced (waiters fell back to their backoff meanwhile)."})
	c.cleanups = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "cleanup_failures_total", ConstLabels: cl,
		Help: "Background releases (of unknown, late or partial grants, or handoffs nobody took) that failed: such grants stay on Redis until their TTL."})
	c.held = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "held_locks"),
		"Grants obtained and not yet released or past their lease.", key(), cl)

	c.patterns = newPatterns(m)
	c.grants = track.NewGrants(nil, func(k string) { c.expirations.WithLabelValues(c.labels(k)...).Inc() })
	if !cfg.keyLabel {
		c.byOutcome = make(map[observe.Outcome]outcomeMetrics, 3)
		for _, o := range []observe.Outcome{observe.Obtained, observe.Contended, observe.Failed} {
			c.byOutcome[o] = outcomeMetrics{
				acquisitions: c.acquisitions.WithLabelValues(string(o)),
				acquireDur:   c.acquireDur.WithLabelValues(string(o)),
				waitDur:      c.waitDur.WithLabelValues(string(o)),
			}
		}
		c.byResult = make(map[string]resultMetrics, 3)
		for _, r := range []string{track.ResultOK, track.ResultNotHeld, track.ResultError} {
			c.byResult[r] = resultMetrics{releases: c.releases.WithLabelValues(r), holdDur: c.holdDur.WithLabelValues(r)}
		}
	}
	return c, nil
}

// labels returns the label values vs, with key appended when the key is a
// label.
func (c *Collector) labels(key string, vs ...string) []string {
	if c.cfg.keyLabel {
		return append(vs, key)
	}
	return vs
}

func (c *Collector) vecs() []prometheus.Collector {
	return append([]prometheus.Collector{c.acquisitions, c.acquireDur, c.waitDur, c.waits, c.waiting, c.holdDur,
		c.releases, c.expirations, c.refreshes, c.refreshDur, c.losses, c.stale, c.nodeFailures,
		c.nodeLastFail, c.resubscribed, c.cleanups}, c.patterns.vecs()...)
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.vecs() {
		v.Describe(ch)
	}
	ch <- c.held
	ch <- c.semHeld
}

// Collect implements prometheus.Collector. It first counts the grants whose
// lease ran out since the last Collect as expirations.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	var perKey map[string]int
	var each func(string)
	if c.cfg.keyLabel {
		perKey = make(map[string]int)
		each = func(k string) { perKey[k]++ }
	}
	n := c.grants.Sweep(each)
	for _, v := range c.vecs() {
		v.Collect(ch)
	}
	c.collectPermits(ch)
	if !c.cfg.keyLabel {
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(n))
		return
	}
	for k, n := range perKey {
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(n), k)
	}
}

// ObtainStart implements observe.ObtainObserver: the call's state (its
// start, and whether it waited) rides in the returned context.
func (c *Collector) ObtainStart(ctx context.Context, _ observe.ObtainStartEvent) context.Context {
	return c.calls.Begin(ctx)
}

// ObtainDone implements observe.ObtainObserver.
func (c *Collector) ObtainDone(ctx context.Context, e observe.ObtainDoneEvent) {
	o := e.Outcome()
	var waitStart time.Time
	if call := c.calls.From(ctx); call != nil {
		waitStart = call.WaitStart()
	}
	if m, ok := c.byOutcome[o]; ok {
		m.acquisitions.Inc()
		m.acquireDur.Observe(e.Wait.Seconds())
		if !waitStart.IsZero() {
			m.waitDur.Observe(time.Since(waitStart).Seconds())
		}
	} else {
		lv := c.labels(e.Key, string(o))
		c.acquisitions.WithLabelValues(lv...).Inc()
		c.acquireDur.WithLabelValues(lv...).Observe(e.Wait.Seconds())
		if !waitStart.IsZero() {
			c.waitDur.WithLabelValues(lv...).Observe(time.Since(waitStart).Seconds())
		}
	}
	if !waitStart.IsZero() {
		c.waiting.WithLabelValues(c.labels(e.Key)...).Dec()
	}
	if e.Err == nil {
		c.grants.Obtained(e.Key, e.Fence, e.TTL)
	}
}

// WaitStart implements observe.WaitObserver.
func (c *Collector) WaitStart(ctx context.Context, e observe.WaitEvent) {
	call := c.calls.From(ctx)
	if call == nil || !call.Waited() {
		return
	}
	lv := c.labels(e.Key)
	c.waits.WithLabelValues(lv...).Inc()
	c.waiting.WithLabelValues(lv...).Inc()
}

// RefreshStart implements observe.RefreshObserver.
func (c *Collector) RefreshStart(ctx context.Context, _ observe.RefreshStartEvent) context.Context {
	return c.calls.Begin(ctx)
}

// RefreshDone implements observe.RefreshObserver.
func (c *Collector) RefreshDone(ctx context.Context, e observe.RefreshDoneEvent) {
	kind, result := track.Kind(e.Renewal), track.Result(e.Err)
	c.refreshes.WithLabelValues(c.labels(e.Key, kind, result)...).Inc()
	if call := c.calls.From(ctx); call != nil {
		c.refreshDur.WithLabelValues(c.labels(e.Key, kind)...).Observe(time.Since(call.Start).Seconds())
	}
	switch result {
	case track.ResultOK:
		c.grants.Refreshed(e.Key, e.Fence, e.TTL)
	case track.ResultNotHeld:
		if e.Renewal {
			c.grants.Lost(e.Key, e.Fence) // a loss, which LockLost reports
		} else if c.grants.Gone(e.Key, e.Fence) {
			c.stale.WithLabelValues(c.labels(e.Key, track.StaleRefresh)...).Inc()
		}
	}
}

// ReleaseStart implements observe.ReleaseObserver.
func (c *Collector) ReleaseStart(ctx context.Context, _ observe.ReleaseStartEvent) context.Context {
	return ctx
}

// ReleaseDone implements observe.ReleaseObserver.
func (c *Collector) ReleaseDone(_ context.Context, e observe.ReleaseDoneEvent) {
	result := track.Result(e.Err)
	if m, ok := c.byResult[result]; ok {
		m.releases.Inc()
		m.holdDur.Observe(e.Held.Seconds())
	} else {
		lv := c.labels(e.Key, result)
		c.releases.WithLabelValues(lv...).Inc()
		c.holdDur.WithLabelValues(lv...).Observe(e.Held.Seconds())
	}
	switch result {
	case track.ResultOK:
		c.grants.Released(e.Key, e.Fence)
	case track.ResultNotHeld:
		if c.grants.Gone(e.Key, e.Fence) {
			c.stale.WithLabelValues(c.labels(e.Key, track.StaleRelease)...).Inc()
		}
	}
}

// LockLost implements observe.LossObserver.
func (c *Collector) LockLost(_ context.Context, e observe.LossEvent) {
	c.losses.WithLabelValues(c.labels(e.Key, track.Reason(e.Cause))...).Inc()
	c.grants.Lost(e.Key, e.Fence)
}

// NodeFailed implements observe.NodeObserver.
func (c *Collector) NodeFailed(_ context.Context, e observe.NodeEvent) {
	node := strconv.Itoa(e.Node)
	c.nodeFailures.WithLabelValues(node, e.Op).Inc()
	c.nodeLastFail.WithLabelValues(node).SetToCurrentTime()
}

// Resubscribed implements observe.SubscriptionObserver.
func (c *Collector) Resubscribed(observe.SubscriptionEvent) { c.resubscribed.Inc() }

// CleanupFailed implements observe.CleanupObserver.
func (c *Collector) CleanupFailed(context.Context, observe.CleanupEvent) { c.cleanups.Inc() }

// StaleFence implements observe.StaleFenceObserver.
func (c *Collector) StaleFence(_ context.Context, e observe.StaleFenceEvent) {
	c.stale.WithLabelValues(c.labels(e.Key, track.StaleWrite)...).Inc()
}
