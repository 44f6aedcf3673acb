package redislockotel

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redislock-go/redislock/extra/internal/track"
	"github.com/redislock-go/redislock/observe"
)

// Observer is a redislock Observer that records OpenTelemetry metrics and
// spans: give it to redislock.New (or NewQuorum) with
// redislock.WithObserver. One Observer may observe several Clients. Its
// methods are safe for concurrent use.
type Observer struct {
	cfg    config
	tracer trace.Tracer
	calls  *track.Key
	grants *track.Grants

	acquisitions metric.Int64Counter
	acquireDur   metric.Float64Histogram
	waitDur      metric.Float64Histogram
	waits        metric.Int64Counter
	waiting      metric.Int64UpDownCounter
	holdDur      metric.Float64Histogram
	releases     metric.Int64Counter
	refreshes    metric.Int64Counter
	refreshDur   metric.Float64Histogram
	losses       metric.Int64Counter
	stale        metric.Int64Counter
	nodeFailures metric.Int64Counter
	resubscribed metric.Int64Counter
	cleanups     metric.Int64Counter
	held         metric.Int64ObservableGauge
	expirations  metric.Int64ObservableCounter
	reg          metric.Registration
	patterns

	mu      sync.Mutex
	expired map[string]int64 // expirations so far, by key ("" without the key attribute)

	// Attribute sets of the label values, made once (without the key
	// attribute) so that recording allocates nothing.
	sets map[string]attrs
	none attrs
}

// attrs is an attribute set as the options of Add and Record, in slices made
// once: an options slice made at each call escapes to the heap.
type attrs struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newAttrs(o metric.MeasurementOption) attrs {
	return attrs{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

var (
	_ observe.ObtainObserver       = (*Observer)(nil)
	_ observe.WaitObserver         = (*Observer)(nil)
	_ observe.RefreshObserver      = (*Observer)(nil)
	_ observe.ReleaseObserver      = (*Observer)(nil)
	_ observe.LossObserver         = (*Observer)(nil)
	_ observe.NodeObserver         = (*Observer)(nil)
	_ observe.SubscriptionObserver = (*Observer)(nil)
	_ observe.CleanupObserver      = (*Observer)(nil)
	_ observe.StaleFenceObserver   = (*Observer)(nil)
)

// Attribute keys.
const (
	AttrKey      = attribute.Key("redislock.key")      // the lock key: spans (unless WithoutSpanKeys); metrics only with WithKeyAttribute
	AttrOutcome  = attribute.Key("redislock.outcome")  // obtained | contended | error
	AttrResult   = attribute.Key("redislock.result")   // ok | not_held | error
	AttrKind     = attribute.Key("redislock.kind")     // renewal | call
	AttrReason   = attribute.Key("redislock.reason")   // not_held | lease_expired
	AttrOp       = attribute.Key("redislock.op")       // stale owner: refresh | release | write; node: obtain, refresh, ...
	AttrNode     = attribute.Key("redislock.node")     // a node's index (NewQuorum's list; 0 in single mode)
	AttrFence    = attribute.Key("redislock.fence")    // spans: the grant's fence
	AttrTTL      = attribute.Key("redislock.ttl")      // spans: the TTL asked for, in seconds
	AttrAttempts = attribute.Key("redislock.attempts") // spans: the attempts of an Obtain
	AttrWaiters  = attribute.Key("redislock.waiters")  // the wait event: callers of the Client waiting for the key
	AttrRenewal  = attribute.Key("redislock.renewal")  // refresh spans: by Run or lease.Hold
)

// Span names.
const (
	SpanObtain  = "redislock.obtain"
	SpanRefresh = "redislock.refresh"
	SpanRelease = "redislock.release"
)

// New returns an Observer. Invalid options (a nil provider, empty or
// unsorted buckets) are errors matching lease.ErrInvalidArgument, and so
// are instruments the meter refuses.
func New(opts ...Option) (*Observer, error) {
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	o := &Observer{
		cfg:     cfg,
		tracer:  cfg.tracerProvider.Tracer(ScopeName),
		calls:   track.NewKey(),
		expired: make(map[string]int64),
	}
	o.grants = track.NewGrants(nil, o.expire)
	o.semCalls, o.permits = track.NewKey(), track.NewGrants(nil, nil)
	if err := o.instruments(cfg.meterProvider.Meter(ScopeName)); err != nil {
		return nil, err
	}
	o.none = newAttrs(metric.WithAttributeSet(*attribute.EmptySet()))
	o.sets = make(map[string]attrs)
	for _, kv := range []attribute.KeyValue{
		AttrOutcome.String(string(observe.Obtained)), AttrOutcome.String(string(observe.Contended)), AttrOutcome.String(string(observe.Failed)),
		AttrResult.String(track.ResultOK), AttrResult.String(track.ResultNotHeld), AttrResult.String(track.ResultError),
		AttrKind.String(track.KindRenewal), AttrKind.String(track.KindCall),
		AttrReason.String(track.ReasonNotHeld), AttrReason.String(track.ReasonLeaseExpired),
		AttrOp.String(track.StaleRefresh), AttrOp.String(track.StaleRelease), AttrOp.String(track.StaleWrite),
	} {
		o.sets[string(kv.Key)+"="+kv.Value.AsString()] = newAttrs(metric.WithAttributeSet(attribute.NewSet(kv)))
	}
	for _, k := range []string{track.KindRenewal, track.KindCall} {
		for _, r := range []string{track.ResultOK, track.ResultNotHeld, track.ResultError} {
			o.sets[k+","+r] = newAttrs(metric.WithAttributeSet(attribute.NewSet(AttrKind.String(k), AttrResult.String(r))))
		}
	}
	return o, nil
}

// Shutdown unregisters the Observer's callbacks from the meter (the held
// locks and expirations are no longer reported).
func (o *Observer) Shutdown() error { return o.reg.Unregister() }

// attrs returns the options for the attribute kv, with the key when the key
// is an attribute.
func (o *Observer) attrs(key string, kv attribute.KeyValue) attrs {
	if o.cfg.keyAttr {
		return newAttrs(metric.WithAttributes(kv, AttrKey.String(key)))
	}
	return o.sets[string(kv.Key)+"="+kv.Value.AsString()]
}

func (o *Observer) keyOnly(key string) attrs {
	if o.cfg.keyAttr {
		return newAttrs(metric.WithAttributes(AttrKey.String(key)))
	}
	return o.none
}

// expire counts one expiration; the Grants call it under their lock.
func (o *Observer) expire(key string) {
	if !o.cfg.keyAttr {
		key = ""
	}
	o.mu.Lock()
	o.expired[key]++
	o.mu.Unlock()
}

// observe reports the held locks and the expirations.
func (o *Observer) observe(_ context.Context, obs metric.Observer) error {
	held := map[string]int64{}
	var each func(string)
	if o.cfg.keyAttr {
		each = func(k string) { held[k]++ }
	}
	n := o.grants.Sweep(each)
	if !o.cfg.keyAttr {
		obs.ObserveInt64(o.held, int64(n))
	}
	for k, n := range held {
		obs.ObserveInt64(o.held, n, metric.WithAttributes(AttrKey.String(k)))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, n := range o.expired {
		if o.cfg.keyAttr {
			obs.ObserveInt64(o.expirations, n, metric.WithAttributes(AttrKey.String(k)))
		} else {
			obs.ObserveInt64(o.expirations, n)
		}
	}
	if len(o.expired) == 0 && !o.cfg.keyAttr {
		obs.ObserveInt64(o.expirations, 0)
	}
	o.observePermits(obs)
	return nil
}

// begin returns ctx with a Call of this Observer and, if start, a new span
// named name, ctx's child, which the Call keeps.
func (o *Observer) begin(ctx context.Context, name string, start bool, attrs ...attribute.KeyValue) context.Context {
	var span trace.Span
	if start {
		ctx, span = o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	}
	call := o.calls.Begin(ctx)
	if span != nil {
		call.Data = span
	}
	return call
}

// span returns the span this Observer started for ctx's call, or nil.
func (o *Observer) span(call *track.Call) trace.Span {
	if call == nil {
		return nil
	}
	s, _ := call.Data.(trace.Span)
	return s
}

func (o *Observer) spanAttrs(key string, ttl time.Duration, more ...attribute.KeyValue) []attribute.KeyValue {
	a := make([]attribute.KeyValue, 0, 2+len(more))
	if o.cfg.spanKeys {
		a = append(a, AttrKey.String(key))
	}
	if ttl > 0 {
		a = append(a, AttrTTL.Float64(ttl.Seconds()))
	}
	return append(a, more...)
}

// ObtainStart implements observe.ObtainObserver: it starts the obtain
// span, a child of ctx's span, and returns its context.
func (o *Observer) ObtainStart(ctx context.Context, e observe.ObtainStartEvent) context.Context {
	return o.begin(ctx, SpanObtain, o.cfg.spans, o.spanAttrs(e.Key, e.TTL)...)
}

// ObtainDone implements observe.ObtainObserver.
func (o *Observer) ObtainDone(ctx context.Context, e observe.ObtainDoneEvent) {
	call := o.calls.From(ctx)
	outcome := e.Outcome()
	oattr := o.attrs(e.Key, AttrOutcome.String(string(outcome)))
	o.acquisitions.Add(ctx, 1, oattr.add...)
	o.acquireDur.Record(ctx, e.Wait.Seconds(), oattr.rec...)
	if call != nil {
		if ws := call.WaitStart(); !ws.IsZero() {
			o.waitDur.Record(ctx, time.Since(ws).Seconds(), oattr.rec...)
			o.waiting.Add(ctx, -1, o.keyOnly(e.Key).add...)
		}
	}
	if e.Err == nil {
		o.grants.Obtained(e.Key, e.Fence, e.TTL)
	}
	endAcquire(o.span(call), outcome, e.Fence, e.Err, AttrAttempts.Int(e.Attempts))
}

// endAcquire ends the span of an Obtain or a semaphore Acquire, if there is
// one, with its outcome, the fence of a grant, and an error's status.
func endAcquire(span trace.Span, outcome observe.Outcome, fence int64, err error, more ...attribute.KeyValue) {
	if span == nil {
		return
	}
	span.SetAttributes(append(more, AttrOutcome.String(string(outcome)))...)
	if err == nil {
		span.SetAttributes(AttrFence.Int64(fence))
	}
	if outcome == observe.Failed {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// WaitStart implements observe.WaitObserver: an event on the obtain
// span, and the contention metrics.
func (o *Observer) WaitStart(ctx context.Context, e observe.WaitEvent) {
	call := o.calls.From(ctx)
	if call == nil || !call.Waited() {
		return
	}
	ka := o.keyOnly(e.Key)
	o.waits.Add(ctx, 1, ka.add...)
	o.waiting.Add(ctx, 1, ka.add...)
	if span := o.span(call); span != nil {
		span.AddEvent("redislock.wait", trace.WithAttributes(AttrWaiters.Int(e.Waiters)))
	}
}

// RefreshStart implements observe.RefreshObserver. A renewal by Run or
// lease.Hold gets a span only when its context carries one (renewals run on
// a context of their own, and a trace per renewal would be noise).
func (o *Observer) RefreshStart(ctx context.Context, e observe.RefreshStartEvent) context.Context {
	start := o.cfg.spans && (!e.Renewal || trace.SpanContextFromContext(ctx).IsValid())
	if !start {
		return o.calls.Begin(ctx)
	}
	return o.begin(ctx, SpanRefresh, true, o.spanAttrs(e.Key, e.TTL, AttrFence.Int64(e.Fence), AttrRenewal.Bool(e.Renewal))...)
}

// RefreshDone implements observe.RefreshObserver.
func (o *Observer) RefreshDone(ctx context.Context, e observe.RefreshDoneEvent) {
	call := o.calls.From(ctx)
	kind, result := track.Kind(e.Renewal), track.Result(e.Err)
	if o.cfg.keyAttr {
		o.refreshes.Add(ctx, 1, metric.WithAttributes(AttrKind.String(kind), AttrResult.String(result), AttrKey.String(e.Key)))
	} else {
		o.refreshes.Add(ctx, 1, o.sets[kind+","+result].add...)
	}
	if call != nil {
		o.refreshDur.Record(ctx, time.Since(call.Start).Seconds(), o.attrs(e.Key, AttrKind.String(kind)).rec...)
	}
	switch result {
	case track.ResultOK:
		o.grants.Refreshed(e.Key, e.Fence, e.TTL)
	case track.ResultNotHeld:
		if e.Renewal {
			o.grants.Lost(e.Key, e.Fence)
		} else if o.grants.Gone(e.Key, e.Fence) {
			o.stale.Add(ctx, 1, o.attrs(e.Key, AttrOp.String(track.StaleRefresh)).add...)
		}
	}
	o.endSpan(call, e.Err)
}

func (o *Observer) endSpan(call *track.Call, err error) {
	span := o.span(call)
	if span == nil {
		return
	}
	span.SetAttributes(AttrResult.String(track.Result(err)))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// ReleaseStart implements observe.ReleaseObserver: it starts the release
// span, a child of ctx's span.
func (o *Observer) ReleaseStart(ctx context.Context, e observe.ReleaseStartEvent) context.Context {
	if !o.cfg.spans {
		return ctx
	}
	return o.begin(ctx, SpanRelease, true, o.spanAttrs(e.Key, 0, AttrFence.Int64(e.Fence))...)
}

// ReleaseDone implements observe.ReleaseObserver.
func (o *Observer) ReleaseDone(ctx context.Context, e observe.ReleaseDoneEvent) {
	result := track.Result(e.Err)
	ra := o.attrs(e.Key, AttrResult.String(result))
	o.releases.Add(ctx, 1, ra.add...)
	o.holdDur.Record(ctx, e.Held.Seconds(), ra.rec...)
	switch result {
	case track.ResultOK:
		o.grants.Released(e.Key, e.Fence)
	case track.ResultNotHeld:
		if o.grants.Gone(e.Key, e.Fence) {
			o.stale.Add(ctx, 1, o.attrs(e.Key, AttrOp.String(track.StaleRelease)).add...)
		}
	}
	o.endSpan(o.calls.From(ctx), e.Err)
}

// LockLost implements observe.LossObserver.
func (o *Observer) LockLost(ctx context.Context, e observe.LossEvent) {
	o.losses.Add(ctx, 1, o.attrs(e.Key, AttrReason.String(track.Reason(e.Cause))).add...)
	o.grants.Lost(e.Key, e.Fence)
}

// NodeFailed implements observe.NodeObserver: the metric, and an event on
// the span of the operation.
func (o *Observer) NodeFailed(ctx context.Context, e observe.NodeEvent) {
	attrs := metric.WithAttributes(AttrNode.Int(e.Node), AttrOp.String(e.Op))
	o.nodeFailures.Add(ctx, 1, attrs)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("redislock.node_failed", trace.WithAttributes(AttrNode.Int(e.Node), AttrOp.String(e.Op), attribute.String("exception.message", e.Err.Error())))
	}
}

// Resubscribed implements observe.SubscriptionObserver.
func (o *Observer) Resubscribed(observe.SubscriptionEvent) {
	o.resubscribed.Add(context.Background(), 1)
}

// CleanupFailed implements observe.CleanupObserver.
func (o *Observer) CleanupFailed(ctx context.Context, _ observe.CleanupEvent) {
	o.cleanups.Add(ctx, 1)
}

// StaleFence implements observe.StaleFenceObserver: the metric, and an
// event on the caller's span.
func (o *Observer) StaleFence(ctx context.Context, e observe.StaleFenceEvent) {
	o.stale.Add(ctx, 1, o.attrs(e.Key, AttrOp.String(track.StaleWrite)).add...)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("redislock.stale_fence", trace.WithAttributes(AttrFence.Int64(e.Fence), attribute.Int64("redislock.newest_fence", e.Newest)))
	}
}
