package redislockprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/dedup"
	"github.com/redislock-go/redislock/leader"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
	"github.com/redislock-go/redislock/semaphore"
	"github.com/redislock-go/redislock/stampede"
)

// queuedSignal tells when an Acquire call queues.
type queuedSignal chan struct{}

func (q queuedSignal) Queued(context.Context, observe.QueueEvent) { q <- struct{}{} }

// A semaphore's calls, waits, renewals and releases reach the Collector:
// the permits held and the calls waiting follow them.
func TestSemaphore(t *testing.T) {
	col, reg, _, srv := setup(t)
	ctx := context.Background()
	queued := make(queuedSignal, 1)
	sem, err := semaphore.New(srv.Client(nil), "pool", 1, semaphore.WithObserver(col), semaphore.WithObserver(queued))
	require.NoError(t, err)
	defer sem.Close()
	p, err := sem.TryAcquire(ctx, time.Minute)
	require.NoError(t, err)
	want(t, reg, 1, "redislock_semaphore_acquisitions_total", "outcome", "obtained")
	want(t, reg, 1, "redislock_semaphore_held_permits")
	_, err = sem.TryAcquire(ctx, time.Minute)
	require.ErrorIs(t, err, lease.ErrNotObtained, "TryAcquire of a taken slot")
	want(t, reg, 1, "redislock_semaphore_acquisitions_total", "outcome", "contended")
	require.NoError(t, p.Refresh(ctx, time.Minute))
	want(t, reg, 1, "redislock_semaphore_refreshes_total", "result", "ok")

	got := make(chan *semaphore.Permit, 1)
	go func() {
		w, err := sem.Acquire(ctx, time.Minute)
		assert.NoError(t, err)
		got <- w
	}()
	<-queued
	want(t, reg, 1, "redislock_semaphore_waiting_calls")
	require.NoError(t, p.Release(ctx))
	w := <-got
	want(t, reg, 0, "redislock_semaphore_waiting_calls")
	want(t, reg, 2, "redislock_semaphore_acquisitions_total", "outcome", "obtained")
	want(t, reg, 1, "redislock_semaphore_held_permits")
	require.NoError(t, w.Release(ctx))
	want(t, reg, 2, "redislock_semaphore_releases_total", "result", "ok")
	want(t, reg, 0, "redislock_semaphore_held_permits")
	require.ErrorIs(t, w.Release(ctx), lease.ErrNotHeld, "second Release")
	want(t, reg, 1, "redislock_semaphore_releases_total", "result", "not_held")
}

// An election's terms reach the Collector: won, led, resigned.
func TestLeader(t *testing.T) {
	col, reg, c, _ := setup(t)
	ctx := context.Background()
	e, err := leader.New(c.Locker(), "boss", leader.WithObserver(col))
	require.NoError(t, err)
	term, err := e.Campaign(ctx)
	require.NoError(t, err)
	want(t, reg, 1, "redislock_leader_terms_total")
	want(t, reg, 1, "redislock_leader_leading")
	require.NoError(t, term.Resign(ctx))
	want(t, reg, 1, "redislock_leader_term_ends_total", "reason", "resigned")
	want(t, reg, 1, "redislock_leader_term_duration_seconds", "reason", "resigned")
	want(t, reg, 0, "redislock_leader_leading")
}

// dedup's outcomes and stampede's answers and fills reach the Collector.
func TestDedupAndStampede(t *testing.T) {
	col, reg, c, _ := setup(t)
	ctx := context.Background()
	g, err := dedup.New(c.Locker(), c.Store(), dedup.WithObserver(col))
	require.NoError(t, err)
	job := func(context.Context, int64) ([]byte, error) { return []byte("done"), nil }
	for range 2 {
		_, err := g.Do(ctx, "job-1", job)
		require.NoError(t, err)
	}
	want(t, reg, 1, "redislock_dedup_jobs_total", "outcome", "ran")
	want(t, reg, 1, "redislock_dedup_jobs_total", "outcome", "duplicate")
	want(t, reg, 1, "redislock_dedup_job_duration_seconds", "outcome", "duplicate")

	sg, err := stampede.New(c.Locker(), c.Store(), stampede.WithObserver(col))
	require.NoError(t, err)
	defer sg.Close()
	fill := func(context.Context) ([]byte, error) { return []byte("v"), nil }
	for range 2 {
		_, err := sg.Do(ctx, "page", time.Minute, fill)
		require.NoError(t, err)
	}
	want(t, reg, 1, "redislock_stampede_requests_total", "result", "filled")
	want(t, reg, 1, "redislock_stampede_requests_total", "result", "hit")
	want(t, reg, 1, "redislock_stampede_fills_total", "kind", "fill", "result", "ok")
	want(t, reg, 1, "redislock_stampede_fill_duration_seconds", "kind", "fill")
}
