package redislockotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redislock-go/redislock/extra/internal/track"
	"github.com/redislock-go/redislock/observe"
)

// Instrument names of the pattern packages.
const (
	MetricSemAcquisitions = "redislock.semaphore.acquisitions"
	MetricSemAcquireDur   = "redislock.semaphore.acquire.duration"
	MetricSemWaiting      = "redislock.semaphore.waiting"
	MetricSemHeld         = "redislock.semaphore.held"
	MetricSemRefreshes    = "redislock.semaphore.refreshes"
	MetricSemReleases     = "redislock.semaphore.releases"
	MetricTerms           = "redislock.leader.terms"
	MetricTermEnds        = "redislock.leader.term_ends"
	MetricLeading         = "redislock.leader.leading"
	MetricTermDur         = "redislock.leader.term.duration"
	MetricJobs            = "redislock.dedup.jobs"
	MetricJobDur          = "redislock.dedup.job.duration"
	MetricCacheRequests   = "redislock.stampede.requests"
	MetricFills           = "redislock.stampede.fills"
	MetricFillDur         = "redislock.stampede.fill.duration"
)

// Span names of the pattern packages.
const (
	SpanSemAcquire = "redislock.semaphore.acquire"
	SpanFill       = "redislock.stampede.fill"
)

// patterns are the instruments of the pattern packages. The semaphore's
// and the leader's carry the semaphore's or election's name as
// redislock.key with WithKeyAttribute; dedup's job ids and stampede's keys
// never do (they are per job and per request).
type patterns struct {
	semCalls *track.Key    // the Acquire calls' state
	permits  *track.Grants // permits held, by semaphore name and fence

	semAcquisitions metric.Int64Counter
	semAcquireDur   metric.Float64Histogram
	semWaiting      metric.Int64UpDownCounter
	semHeld         metric.Int64ObservableGauge
	semRefreshes    metric.Int64Counter
	semReleases     metric.Int64Counter
	terms           metric.Int64Counter
	termEnds        metric.Int64Counter
	leading         metric.Int64UpDownCounter
	termDur         metric.Float64Histogram
	jobs            metric.Int64Counter
	jobDur          metric.Float64Histogram
	requests        metric.Int64Counter
	fills           metric.Int64Counter
	fillDur         metric.Float64Histogram
}

var (
	_ observe.AcquireObserver = (*Observer)(nil)
	_ observe.QueueObserver   = (*Observer)(nil)
	_ observe.PermitObserver  = (*Observer)(nil)
	_ observe.TermObserver    = (*Observer)(nil)
	_ observe.JobObserver     = (*Observer)(nil)
	_ observe.CacheObserver   = (*Observer)(nil)
	_ observe.FillObserver    = (*Observer)(nil)
)

func (o *Observer) patternInstruments(m metric.Meter,
	counter func(name, unit, desc string) metric.Int64Counter,
	histogram func(name, desc string, buckets []float64) metric.Float64Histogram,
) error {
	c := o.cfg
	p := &o.patterns
	p.semAcquisitions = counter(MetricSemAcquisitions, "{acquisition}", "Semaphore Acquire and TryAcquire calls, by redislock.outcome: obtained, contended, error.")
	p.semAcquireDur = histogram(MetricSemAcquireDur, "Time from a semaphore Acquire call to its return, waiting included, by redislock.outcome.", c.latency)
	p.semRefreshes = counter(MetricSemRefreshes, "{refresh}", "Permit renewals, by redislock.result: ok, not_held (the permit's lease had ended), error.")
	p.semReleases = counter(MetricSemReleases, "{release}", "Permit releases, by redislock.result: ok, not_held, error.")
	p.terms = counter(MetricTerms, "{term}", "Terms of leadership this process won: elections.")
	p.termEnds = counter(MetricTermEnds, "{term}", "Terms of leadership that ended, by redislock.reason: resigned, lost.")
	p.termDur = histogram(MetricTermDur, "How long terms of leadership lasted, by redislock.reason.", c.hold)
	p.jobs = counter(MetricJobs, "{call}", "dedup Do calls, by redislock.outcome: ran, duplicate, in_progress, error.")
	p.jobDur = histogram(MetricJobDur, "Time from a dedup Do call to its return, by redislock.outcome.", c.wait)
	p.requests = counter(MetricCacheRequests, "{call}", "stampede Do calls, by redislock.result: hit, filled, waited (another process filled it), error.")
	p.fills = counter(MetricFills, "{fill}", "stampede fills, by redislock.kind (fill, refresh) and redislock.result (ok, error).")
	p.fillDur = histogram(MetricFillDur, "Time a stampede fill took, by redislock.kind.", c.wait)
	var errs [3]error
	p.semWaiting, errs[0] = m.Int64UpDownCounter(MetricSemWaiting, metric.WithUnit("{call}"), metric.WithDescription("Semaphore Acquire calls waiting in the queue now."))
	p.leading, errs[1] = m.Int64UpDownCounter(MetricLeading, metric.WithUnit("{term}"), metric.WithDescription("Terms of leadership this process holds now."))
	p.semHeld, errs[2] = m.Int64ObservableGauge(MetricSemHeld, metric.WithUnit("{permit}"), metric.WithDescription("Semaphore permits acquired and not yet released or past their lease."))
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// observePermits reports the permits held, past their lease first swept.
func (o *Observer) observePermits(obs metric.Observer) {
	if !o.cfg.keyAttr {
		obs.ObserveInt64(o.semHeld, int64(o.permits.Sweep(nil)))
		return
	}
	perName := map[string]int64{}
	o.permits.Sweep(func(name string) { perName[name]++ })
	for name, n := range perName {
		obs.ObserveInt64(o.semHeld, n, metric.WithAttributes(AttrKey.String(name)))
	}
}

// named returns the attributes kvs, with name as redislock.key when the key
// is an attribute.
func (o *Observer) named(name string, kvs ...attribute.KeyValue) metric.MeasurementOption {
	if o.cfg.keyAttr {
		kvs = append(kvs, AttrKey.String(name))
	}
	return metric.WithAttributes(kvs...)
}

// AcquireStart implements observe.AcquireObserver: it starts the acquire
// span, a child of ctx's span, and returns its context.
func (o *Observer) AcquireStart(ctx context.Context, e observe.AcquireStartEvent) context.Context {
	var span trace.Span
	if o.cfg.spans {
		ctx, span = o.tracer.Start(ctx, SpanSemAcquire, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(o.spanAttrs(e.Semaphore, e.TTL)...))
	}
	call := o.semCalls.Begin(ctx)
	if span != nil {
		call.Data = span
	}
	return call
}

// AcquireDone implements observe.AcquireObserver.
func (o *Observer) AcquireDone(ctx context.Context, e observe.AcquireDoneEvent) {
	outcome := e.Outcome()
	attrs := o.named(e.Semaphore, AttrOutcome.String(string(outcome)))
	o.semAcquisitions.Add(ctx, 1, attrs)
	o.semAcquireDur.Record(ctx, e.Wait.Seconds(), attrs)
	call := o.semCalls.From(ctx)
	if call != nil && !call.WaitStart().IsZero() {
		o.semWaiting.Add(ctx, -1, o.named(e.Semaphore))
	}
	if e.Err == nil {
		o.permits.Obtained(e.Semaphore, e.Fence, e.TTL)
	}
	endAcquire(o.span(call), outcome, e.Fence, e.Err)
}

// Queued implements observe.QueueObserver: the waiting calls, and an
// event on the acquire span.
func (o *Observer) Queued(ctx context.Context, e observe.QueueEvent) {
	call := o.semCalls.From(ctx)
	if call == nil || !call.Waited() {
		return
	}
	o.semWaiting.Add(ctx, 1, o.named(e.Semaphore))
	if span := o.span(call); span != nil {
		span.AddEvent("redislock.wait")
	}
}

// PermitRefreshed implements observe.PermitObserver.
func (o *Observer) PermitRefreshed(ctx context.Context, e observe.PermitEvent) {
	result := track.Result(e.Err)
	o.semRefreshes.Add(ctx, 1, o.named(e.Semaphore, AttrResult.String(result)))
	switch result {
	case track.ResultOK:
		o.permits.Refreshed(e.Semaphore, e.Fence, e.TTL)
	case track.ResultNotHeld:
		o.permits.Gone(e.Semaphore, e.Fence)
	}
}

// PermitReleased implements observe.PermitObserver.
func (o *Observer) PermitReleased(ctx context.Context, e observe.PermitEvent) {
	result := track.Result(e.Err)
	o.semReleases.Add(ctx, 1, o.named(e.Semaphore, AttrResult.String(result)))
	switch result {
	case track.ResultOK:
		o.permits.Released(e.Semaphore, e.Fence)
	case track.ResultNotHeld:
		o.permits.Gone(e.Semaphore, e.Fence)
	}
}

// TermStarted implements observe.TermObserver.
func (o *Observer) TermStarted(ctx context.Context, e observe.TermEvent) {
	o.terms.Add(ctx, 1, o.named(e.Election))
	o.leading.Add(ctx, 1, o.named(e.Election))
}

// TermEnded implements observe.TermObserver.
func (o *Observer) TermEnded(ctx context.Context, e observe.TermEvent) {
	attrs := o.named(e.Election, AttrReason.String(track.TermReason(e.Lost())))
	o.termEnds.Add(ctx, 1, attrs)
	o.termDur.Record(ctx, e.Held.Seconds(), attrs)
	o.leading.Add(ctx, -1, o.named(e.Election))
}

// JobDone implements observe.JobObserver.
func (o *Observer) JobDone(ctx context.Context, e observe.JobEvent) {
	attrs := metric.WithAttributes(AttrOutcome.String(string(e.Outcome)))
	o.jobs.Add(ctx, 1, attrs)
	o.jobDur.Record(ctx, e.Duration.Seconds(), attrs)
}

// CacheDone implements observe.CacheObserver.
func (o *Observer) CacheDone(ctx context.Context, e observe.CacheEvent) {
	o.requests.Add(ctx, 1, metric.WithAttributes(AttrResult.String(string(e.Result))))
}

// FillStart implements observe.FillObserver: it starts the fill span,
// which the fill's own calls join.
func (o *Observer) FillStart(ctx context.Context, e observe.FillStartEvent) context.Context {
	if !o.cfg.spans {
		return ctx
	}
	return o.begin(ctx, SpanFill, true, o.spanAttrs(e.Key, 0, AttrKind.String(track.FillKind(e.Refresh)))...)
}

// FillDone implements observe.FillObserver.
func (o *Observer) FillDone(ctx context.Context, e observe.FillDoneEvent) {
	kind := track.FillKind(e.Refresh)
	o.fills.Add(ctx, 1, metric.WithAttributes(AttrKind.String(kind), AttrResult.String(track.FillResult(e.Err))))
	o.fillDur.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(AttrKind.String(kind)))
	if !o.cfg.spans {
		return
	}
	if span := o.span(o.calls.From(ctx)); span != nil {
		if e.Err != nil {
			span.RecordError(e.Err)
			span.SetStatus(codes.Error, e.Err.Error())
		}
		span.End()
	}
}
