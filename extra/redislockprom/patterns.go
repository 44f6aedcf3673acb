package redislockprom

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redislock-go/redislock/extra/internal/track"
	"github.com/redislock-go/redislock/observe"
)

// maker makes the Collector's metrics with its namespace and constant
// labels.
type maker struct{ cfg config }

// key returns labels, with "key" appended when the key is a label.
func (m maker) key(labels ...string) []string {
	if m.cfg.keyLabel {
		return append(labels, "key")
	}
	return labels
}

func (m maker) counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: m.cfg.namespace, Name: name, Help: help, ConstLabels: m.cfg.constLabels}, labels)
}

func (m maker) histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: m.cfg.namespace, Name: name, Help: help, Buckets: buckets, ConstLabels: m.cfg.constLabels}, labels)
}

func (m maker) gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: m.cfg.namespace, Name: name, Help: help, ConstLabels: m.cfg.constLabels}, labels)
}

// patterns are the metrics of the pattern packages. The semaphore's and
// the leader's carry the semaphore's or election's name as "key" with
// WithKeyLabel; dedup's job ids and stampede's keys never do (they are per
// job and per request).
type patterns struct {
	semCalls        *track.Key    // the Acquire calls' state
	permits         *track.Grants // permits held, by semaphore name and fence
	semAcquisitions *prometheus.CounterVec
	semAcquireDur   *prometheus.HistogramVec
	semWaiting      *prometheus.GaugeVec
	semRefreshes    *prometheus.CounterVec
	semReleases     *prometheus.CounterVec
	semHeld         *prometheus.Desc

	terms    *prometheus.CounterVec
	termEnds *prometheus.CounterVec
	leading  *prometheus.GaugeVec
	termDur  *prometheus.HistogramVec

	jobs   *prometheus.CounterVec
	jobDur *prometheus.HistogramVec

	requests *prometheus.CounterVec
	fills    *prometheus.CounterVec
	fillDur  *prometheus.HistogramVec
}

var (
	_ observe.AcquireObserver = (*Collector)(nil)
	_ observe.QueueObserver   = (*Collector)(nil)
	_ observe.PermitObserver  = (*Collector)(nil)
	_ observe.TermObserver    = (*Collector)(nil)
	_ observe.JobObserver     = (*Collector)(nil)
	_ observe.CacheObserver   = (*Collector)(nil)
	_ observe.FillObserver    = (*Collector)(nil)
)

func newPatterns(m maker) patterns {
	cfg := m.cfg
	return patterns{
		semCalls: track.NewKey(),
		permits:  track.NewGrants(nil, nil),
		semAcquisitions: m.counter("semaphore_acquisitions_total",
			"Semaphore Acquire and TryAcquire calls by outcome: obtained, contended (every slot taken until the wait ended), error.", m.key("outcome")...),
		semAcquireDur: m.histogram("semaphore_acquire_duration_seconds",
			"Time from a semaphore Acquire or TryAcquire call to its return, waiting included, by outcome.", cfg.latency, m.key("outcome")...),
		semWaiting: m.gauge("semaphore_waiting_calls",
			"Semaphore Acquire calls waiting in the queue now.", m.key()...),
		semRefreshes: m.counter("semaphore_refreshes_total",
			"Permit renewals by result: ok, not_held (the permit's lease had ended), error.", m.key("result")...),
		semReleases: m.counter("semaphore_releases_total",
			"Permit releases by result: ok, not_held (the permit's lease had ended), error.", m.key("result")...),
		semHeld: prometheus.NewDesc(prometheus.BuildFQName(cfg.namespace, "", "semaphore_held_permits"),
			"Semaphore permits acquired and not yet released or past their lease.", m.key(), cfg.constLabels),
		terms: m.counter("leader_terms_total",
			"Terms of leadership this process won: elections.", m.key()...),
		termEnds: m.counter("leader_term_ends_total",
			"Terms of leadership that ended, by reason: resigned, lost (the lock was lost).", m.key("reason")...),
		leading: m.gauge("leader_leading",
			"Terms of leadership this process holds now (1 per election it leads).", m.key()...),
		termDur: m.histogram("leader_term_duration_seconds",
			"How long the terms of leadership lasted, by the reason they ended.", cfg.hold, m.key("reason")...),
		jobs: m.counter("dedup_jobs_total",
			"dedup Do calls by outcome: ran (this call ran the job), duplicate (an earlier run's outcome was recorded), in_progress (another worker runs it), error.", "outcome"),
		jobDur: m.histogram("dedup_job_duration_seconds",
			"Time from a dedup Do call to its return, by outcome.", cfg.wait, "outcome"),
		requests: m.counter("stampede_requests_total",
			"stampede Do calls by result: hit (in the cache), filled (this process filled it), waited (another process filled it meanwhile), error.", "result"),
		fills: m.counter("stampede_fills_total",
			"stampede fills by kind (fill: a missing value; refresh: an early refresh) and result (ok, error).", "kind", "result"),
		fillDur: m.histogram("stampede_fill_duration_seconds",
			"Time a stampede fill took, by kind.", cfg.wait, "kind"),
	}
}

func (p *patterns) vecs() []prometheus.Collector {
	return []prometheus.Collector{p.semAcquisitions, p.semAcquireDur, p.semWaiting, p.semRefreshes, p.semReleases,
		p.terms, p.termEnds, p.leading, p.termDur, p.jobs, p.jobDur, p.requests, p.fills, p.fillDur}
}

// collectPermits sends the permits held, past their lease first swept.
func (c *Collector) collectPermits(ch chan<- prometheus.Metric) {
	if !c.cfg.keyLabel {
		ch <- prometheus.MustNewConstMetric(c.semHeld, prometheus.GaugeValue, float64(c.permits.Sweep(nil)))
		return
	}
	perName := map[string]int{}
	c.permits.Sweep(func(name string) { perName[name]++ })
	for name, n := range perName {
		ch <- prometheus.MustNewConstMetric(c.semHeld, prometheus.GaugeValue, float64(n), name)
	}
}

// AcquireStart implements observe.AcquireObserver: the call's state rides
// in the returned context.
func (c *Collector) AcquireStart(ctx context.Context, _ observe.AcquireStartEvent) context.Context {
	return c.semCalls.Begin(ctx)
}

// AcquireDone implements observe.AcquireObserver.
func (c *Collector) AcquireDone(ctx context.Context, e observe.AcquireDoneEvent) {
	lv := c.labels(e.Semaphore, string(e.Outcome()))
	c.semAcquisitions.WithLabelValues(lv...).Inc()
	c.semAcquireDur.WithLabelValues(lv...).Observe(e.Wait.Seconds())
	if call := c.semCalls.From(ctx); call != nil && !call.WaitStart().IsZero() {
		c.semWaiting.WithLabelValues(c.labels(e.Semaphore)...).Dec()
	}
	if e.Err == nil {
		c.permits.Obtained(e.Semaphore, e.Fence, e.TTL)
	}
}

// Queued implements observe.QueueObserver.
func (c *Collector) Queued(ctx context.Context, e observe.QueueEvent) {
	if call := c.semCalls.From(ctx); call != nil && call.Waited() {
		c.semWaiting.WithLabelValues(c.labels(e.Semaphore)...).Inc()
	}
}

// PermitRefreshed implements observe.PermitObserver.
func (c *Collector) PermitRefreshed(_ context.Context, e observe.PermitEvent) {
	result := track.Result(e.Err)
	c.semRefreshes.WithLabelValues(c.labels(e.Semaphore, result)...).Inc()
	switch result {
	case track.ResultOK:
		c.permits.Refreshed(e.Semaphore, e.Fence, e.TTL)
	case track.ResultNotHeld:
		c.permits.Gone(e.Semaphore, e.Fence)
	}
}

// PermitReleased implements observe.PermitObserver.
func (c *Collector) PermitReleased(_ context.Context, e observe.PermitEvent) {
	result := track.Result(e.Err)
	c.semReleases.WithLabelValues(c.labels(e.Semaphore, result)...).Inc()
	switch result {
	case track.ResultOK:
		c.permits.Released(e.Semaphore, e.Fence)
	case track.ResultNotHeld:
		c.permits.Gone(e.Semaphore, e.Fence)
	}
}

// TermStarted implements observe.TermObserver.
func (c *Collector) TermStarted(_ context.Context, e observe.TermEvent) {
	lv := c.labels(e.Election)
	c.terms.WithLabelValues(lv...).Inc()
	c.leading.WithLabelValues(lv...).Inc()
}

// TermEnded implements observe.TermObserver.
func (c *Collector) TermEnded(_ context.Context, e observe.TermEvent) {
	reason := track.TermReason(e.Lost())
	c.termEnds.WithLabelValues(c.labels(e.Election, reason)...).Inc()
	c.termDur.WithLabelValues(c.labels(e.Election, reason)...).Observe(e.Held.Seconds())
	c.leading.WithLabelValues(c.labels(e.Election)...).Dec()
}

// JobDone implements observe.JobObserver.
func (c *Collector) JobDone(_ context.Context, e observe.JobEvent) {
	c.jobs.WithLabelValues(string(e.Outcome)).Inc()
	c.jobDur.WithLabelValues(string(e.Outcome)).Observe(e.Duration.Seconds())
}

// CacheDone implements observe.CacheObserver.
func (c *Collector) CacheDone(_ context.Context, e observe.CacheEvent) {
	c.requests.WithLabelValues(string(e.Result)).Inc()
}

// FillStart implements observe.FillObserver.
func (c *Collector) FillStart(ctx context.Context, _ observe.FillStartEvent) context.Context {
	return ctx
}

// FillDone implements observe.FillObserver.
func (c *Collector) FillDone(_ context.Context, e observe.FillDoneEvent) {
	kind := track.FillKind(e.Refresh)
	c.fills.WithLabelValues(kind, track.FillResult(e.Err)).Inc()
	c.fillDur.WithLabelValues(kind).Observe(e.Duration.Seconds())
}
