package redislockotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/extra/redislockotel"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/observe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	t      *testing.T
	obs    *redislockotel.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	c      *redislock.Client
	srv    *redistest.Server
}

func setup(t *testing.T, opts ...redislockotel.Option) *env {
	t.Helper()
	e := &env{t: t, reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.reader))
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = e.tp.Shutdown(context.Background()) })
	var err error
	e.obs, err = redislockotel.New(append([]redislockotel.Option{redislockotel.WithMeterProvider(mp), redislockotel.WithTracerProvider(e.tp)}, opts...)...)
	require.NoError(t, err)
	e.srv = redistest.Start(t)
	e.c = redislock.New(e.srv.Client(func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond }), redislock.WithObserver(e.obs))
	t.Cleanup(func() { _ = e.c.Close() })
	return e
}

// value returns the sum over the data points of the instrument name that
// have every attribute in attrs: a counter's or gauge's value, a
// histogram's count; 0 when there are none.
func (e *env) value(name string, attrs ...attribute.KeyValue) float64 {
	e.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := e.reader.Collect(context.Background(), &rm); err != nil {
		e.t.Fatal(err)
	}
	match := func(set attribute.Set) bool {
		for _, kv := range attrs {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	var sum float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						sum += float64(p.Value)
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						sum += float64(p.Value)
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						sum += float64(p.Count)
					}
				}
			default:
				e.t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
		}
	}
	return sum
}

func (e *env) want(w float64, name string, attrs ...attribute.KeyValue) {
	e.t.Helper()
	if got := e.value(name, attrs...); got != w {
		e.t.Errorf("%s%v = %v, want %v", name, attrs, got, w)
	}
}

func (e *env) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

var (
	obtained  = redislockotel.AttrOutcome.String("obtained")
	contended = redislockotel.AttrOutcome.String("contended")
	ok        = redislockotel.AttrResult.String("ok")
	notHeld   = redislockotel.AttrResult.String("not_held")
)

func TestSpansJoinCallersTrace(t *testing.T) {
	e := setup(t)
	ctx, parent := e.tp.Tracer("test").Start(context.Background(), "caller")
	l, err := e.c.Obtain(ctx, "job", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Refresh(ctx, time.Minute))
	require.NoError(t, l.Release(ctx))
	parent.End()
	for _, name := range []string{redislockotel.SpanObtain, redislockotel.SpanRefresh, redislockotel.SpanRelease} {
		spans := e.ended(name)
		require.Len(t, spans, 1, "%d %s spans, want 1", len(spans), name)
		s := spans[0]
		assert.False(t, s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID(), "%s: parent %v, want the caller's span %v", name, s.Parent().SpanID(), parent.SpanContext().SpanID())
		attrs := attribute.NewSet(s.Attributes()...)
		if v, _ := attrs.Value(redislockotel.AttrKey); v.AsString() != "job" {
			t.Errorf("%s: key attribute %q", name, v.AsString())
		}
		if v, _ := attrs.Value(redislockotel.AttrFence); v.AsInt64() != l.Fence() {
			t.Errorf("%s: fence %d, want %d", name, v.AsInt64(), l.Fence())
		}
		for _, kv := range s.Attributes() {
			assert.False(t, strings.Contains(kv.Value.Emit(), l.Token()), "%s: attribute %s carries the token", name, kv.Key)
		}
	}
	oattrs := attribute.NewSet(e.ended(redislockotel.SpanObtain)[0].Attributes()...)
	if v, _ := oattrs.Value(redislockotel.AttrOutcome); v.AsString() != "obtained" {
		t.Errorf("obtain outcome %q", v.AsString())
	}
	e.want(1, redislockotel.MetricAcquisitions, obtained)
	e.want(1, redislockotel.MetricAcquireDur, obtained)
	e.want(1, redislockotel.MetricRefreshes, redislockotel.AttrKind.String("call"), ok)
	e.want(1, redislockotel.MetricRefreshDur)
	e.want(1, redislockotel.MetricReleases, ok)
	e.want(1, redislockotel.MetricHoldDur, ok)
	e.want(0, redislockotel.MetricHeld)
}

// waitSignal reports WaitStart without blocking the Client.
type waitSignal chan struct{}

func (w waitSignal) WaitStart(context.Context, observe.WaitEvent) {
	select {
	case w <- struct{}{}:
	default:
	}
}

func TestWaitAndContention(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer mp.Shutdown(context.Background())
	defer tp.Shutdown(context.Background())
	obs, err := redislockotel.New(redislockotel.WithMeterProvider(mp), redislockotel.WithTracerProvider(tp))
	require.NoError(t, err)
	e := &env{t: t, obs: obs, reader: reader, spans: rec, tp: tp, srv: redistest.Start(t)}
	sig := make(waitSignal, 1)
	e.c = redislock.New(e.srv.Client(nil), redislock.WithObserver(obs), redislock.WithObserver(sig))
	defer e.c.Close()
	holder := redislock.New(e.srv.Client(nil))
	defer holder.Close()

	ctx := context.Background()
	hl, err := holder.Obtain(ctx, "hot", time.Minute)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := e.c.Obtain(ctx, "hot", time.Minute, redislock.WithRetry(redislock.LinearBackoff(time.Second)), redislock.WithMaxWait(time.Minute))
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	<-sig
	e.want(1, redislockotel.MetricWaits)
	e.want(1, redislockotel.MetricWaiting)
	require.NoError(t, hl.Release(ctx))
	require.NoError(t, <-got)
	e.want(0, redislockotel.MetricWaiting)
	e.want(1, redislockotel.MetricWaitDur, obtained)
	spans := e.ended(redislockotel.SpanObtain)
	require.Len(t, spans, 1, "obtain spans %v: want one with a wait event", spans)
	require.Len(t, spans[0].Events(), 1, "obtain spans %v: want one with a wait event", spans)
	require.Equal(t, "redislock.wait", spans[0].Events()[0].Name, "obtain spans %v: want one with a wait event", spans)

	// Contended until the wait ends.
	_, err = holder.Obtain(ctx, "hot", time.Minute)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	_, err = e.c.Obtain(wctx, "hot", time.Minute, redislock.WithRetry(redislock.LinearBackoff(5*time.Millisecond)))
	require.ErrorIs(t, err, redislock.ErrNotObtained, "Obtain")
	e.want(1, redislockotel.MetricAcquisitions, contended)
	e.want(1, redislockotel.MetricWaitDur, contended)
}

func TestExpirationsAndLoss(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	const ttl = 50 * time.Millisecond
	l, err := e.c.Obtain(ctx, "late", ttl)
	require.NoError(t, err)
	obtainedAt := time.Now()
	e.want(1, redislockotel.MetricHeld)
	time.Sleep(time.Until(obtainedAt.Add(ttl + time.Millisecond))) // the lease running out is the event
	e.want(0, redislockotel.MetricHeld)
	e.want(1, redislockotel.MetricExpirations)
	require.ErrorIs(t, l.Release(ctx), redislock.ErrNotHeld, "Release")
	e.want(1, redislockotel.MetricReleases, notHeld)
	e.want(1, redislockotel.MetricStaleOwner, redislockotel.AttrOp.String("release"))
	e.want(1, redislockotel.MetricExpirations)

	err = e.c.Run(ctx, "stolen", 300*time.Millisecond, func(ctx context.Context, l *redislock.Lock) error {
		if _, err := e.srv.Do("DEL", "redislock:{stolen}"); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	})
	require.ErrorIs(t, err, redislock.ErrLockLost, "Run")
	e.want(1, redislockotel.MetricLosses, redislockotel.AttrReason.String("not_held"))
	e.want(1, redislockotel.MetricRefreshes, redislockotel.AttrKind.String("renewal"), notHeld)
	e.want(2, redislockotel.MetricExpirations)
	e.want(1, redislockotel.MetricStaleOwner, redislockotel.AttrOp.String("release")) // Run's release after the loss is no stale owner's
	// A renewal runs on a context of its own: no root span per renewal.
	if n := len(e.ended(redislockotel.SpanRefresh)); n != 0 {
		t.Errorf("%d refresh spans for renewals, want 0", n)
	}
}

func TestNodeAndStore(t *testing.T) {
	e := setup(t)
	ctx, parent := e.tp.Tracer("test").Start(context.Background(), "caller")
	st := e.c.Store()
	require.NoError(t, st.Put(ctx, "rec", []byte("new"), 10, 0))
	require.ErrorIs(t, st.Put(ctx, "rec", []byte("old"), 9, 0), redislock.ErrStaleFence, "stale Put")
	e.want(1, redislockotel.MetricStaleOwner, redislockotel.AttrOp.String("write"))

	e.srv.Kill()
	if _, err := e.c.Obtain(ctx, "k", time.Second); err == nil || errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("Obtain on a dead server: %v", err)
	}
	parent.End()
	e.want(1, redislockotel.MetricAcquisitions, redislockotel.AttrOutcome.String("error"))
	e.want(1, redislockotel.MetricNodeFailures, redislockotel.AttrNode.Int(0), redislockotel.AttrOp.String("obtain"))
	spans := e.ended(redislockotel.SpanObtain)
	require.Len(t, spans, 1, "obtain span on a dead server: %+v", spans)
	require.Equal(t, "Error", spans[0].Status().Code.String(), "obtain span on a dead server: %+v", spans)
	require.NotEqual(t, 0, len(spans[0].Events()), "obtain span on a dead server: %+v", spans)

	e.obs.CleanupFailed(ctx, observe.CleanupEvent{Key: "k", Err: errors.New("x")})
	e.want(1, redislockotel.MetricCleanupFailed)
	e.obs.Resubscribed(observe.SubscriptionEvent{Err: errors.New("x")})
	e.want(1, redislockotel.MetricResubscribed)
}

func TestKeyAttribute(t *testing.T) {
	e := setup(t, redislockotel.WithKeyAttribute(), redislockotel.WithoutSpans())
	ctx := context.Background()
	l, err := e.c.Obtain(ctx, "nightly", time.Minute)
	require.NoError(t, err)
	e.want(1, redislockotel.MetricAcquisitions, obtained, redislockotel.AttrKey.String("nightly"))
	e.want(1, redislockotel.MetricHeld, redislockotel.AttrKey.String("nightly"))
	_ = l.Release(ctx)
	e.want(1, redislockotel.MetricReleases, ok, redislockotel.AttrKey.String("nightly"))
	if n := len(e.spans.Ended()); n != 0 {
		t.Errorf("%d spans with WithoutSpans", n)
	}
}

func TestNoKeyByDefault(t *testing.T) {
	e := setup(t, redislockotel.WithoutSpanKeys())
	ctx := context.Background()
	l, err := e.c.Obtain(ctx, "secret-key", time.Minute)
	require.NoError(t, err)
	_ = l.Release(ctx)
	assert.False(t, e.value(redislockotel.MetricAcquisitions, redislockotel.AttrKey.String("secret-key")) != 0, "the key is a metric attribute without WithKeyAttribute")
	for _, s := range e.spans.Ended() {
		for _, kv := range s.Attributes() {
			assert.NotEqual(t, redislockotel.AttrKey, kv.Key, "%s carries the key with WithoutSpanKeys", s.Name())
		}
	}
}

func TestInvalidOptions(t *testing.T) {
	for name, o := range map[string]redislockotel.Option{
		"nil meter":  redislockotel.WithMeterProvider(nil),
		"nil tracer": redislockotel.WithTracerProvider(nil),
		"no buckets": redislockotel.WithLatencyBuckets(),
		"unsorted":   redislockotel.WithHoldBuckets(2, 1),
	} {
		_, err := redislockotel.New(o)
		assert.ErrorIs(t, err, redislock.ErrInvalidArgument, "%s, want ErrInvalidArgument", name)
	}
}
