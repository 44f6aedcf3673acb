package redislockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/dedup"
	"github.com/redislock-go/redislock/extra/redislockotel"
	"github.com/redislock-go/redislock/leader"
	"github.com/redislock-go/redislock/observe"
	"github.com/redislock-go/redislock/semaphore"
	"github.com/redislock-go/redislock/stampede"
)

// queuedSignal tells when an Acquire call queues.
type queuedSignal chan struct{}

func (q queuedSignal) Queued(context.Context, observe.QueueEvent) { q <- struct{}{} }

var (
	outcome = redislockotel.AttrOutcome.String
	result  = redislockotel.AttrResult.String
)

// A semaphore's calls, waits and releases reach the Observer's metrics,
// and each Acquire is a span.
func TestSemaphore(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	queued := make(queuedSignal, 1)
	sem, err := semaphore.New(e.srv.Client(nil), "pool", 1, semaphore.WithObserver(e.obs), semaphore.WithObserver(queued))
	require.NoError(t, err)
	defer sem.Close()
	p, err := sem.TryAcquire(ctx, time.Minute)
	require.NoError(t, err)
	e.want(1, redislockotel.MetricSemAcquisitions, outcome("obtained"))
	e.want(1, redislockotel.MetricSemHeld)
	got := make(chan *semaphore.Permit, 1)
	go func() {
		w, err := sem.Acquire(ctx, time.Minute)
		assert.NoError(t, err)
		got <- w
	}()
	<-queued
	e.want(1, redislockotel.MetricSemWaiting)
	require.NoError(t, p.Release(ctx))
	w := <-got
	e.want(0, redislockotel.MetricSemWaiting)
	require.NoError(t, w.Release(ctx))
	e.want(2, redislockotel.MetricSemReleases, result("ok"))
	e.want(0, redislockotel.MetricSemHeld)
	if n := len(e.ended(redislockotel.SpanSemAcquire)); n != 2 {
		t.Errorf("%d acquire spans, want 2", n)
	}
}

// Terms, dedup outcomes and stampede answers reach the metrics; a fill is
// a span that the fill's own calls join.
func TestLeaderDedupStampede(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	el, err := leader.New(e.c.Locker(), "boss", leader.WithObserver(e.obs))
	require.NoError(t, err)
	term, err := el.Campaign(ctx)
	require.NoError(t, err)
	e.want(1, redislockotel.MetricLeading)
	require.NoError(t, term.Resign(ctx))
	e.want(1, redislockotel.MetricTerms)
	e.want(1, redislockotel.MetricTermEnds, redislockotel.AttrReason.String("resigned"))
	e.want(0, redislockotel.MetricLeading)

	g, err := dedup.New(e.c.Locker(), e.c.Store(), dedup.WithObserver(e.obs))
	require.NoError(t, err)
	job := func(context.Context, int64) ([]byte, error) { return nil, nil }
	for range 2 {
		_, err := g.Do(ctx, "job-1", job)
		require.NoError(t, err)
	}
	e.want(1, redislockotel.MetricJobs, outcome("ran"))
	e.want(1, redislockotel.MetricJobs, outcome("duplicate"))

	sg, err := stampede.New(e.c.Locker(), e.c.Store(), stampede.WithObserver(e.obs))
	require.NoError(t, err)
	defer sg.Close()
	var inFill trace.SpanContext
	fill := func(ctx context.Context) ([]byte, error) {
		inFill = trace.SpanContextFromContext(ctx)
		return nil, errors.New("no value")
	}
	_, err = sg.Do(ctx, "page", time.Minute, fill)
	require.ErrorIs(t, err, stampede.ErrFillFailed, "Do")
	e.want(1, redislockotel.MetricCacheRequests, result("error"))
	e.want(1, redislockotel.MetricFills, redislockotel.AttrKind.String("fill"), result("error"))
	spans := e.ended(redislockotel.SpanFill)
	require.Len(t, spans, 1, "fill spans %v; the fill ran in span %v", spans, inFill.SpanID())
	require.False(t, spans[0].SpanContext().SpanID() != inFill.SpanID(), "fill spans %v; the fill ran in span %v", spans, inFill.SpanID())
	if spans[0].Status().Description != "no value" {
		t.Errorf("fill span status %v, want the fill's error", spans[0].Status())
	}
}
