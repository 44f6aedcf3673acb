package dedup_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/dedup"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/leasetest"
)

// A crashed worker's job recovers within seconds by default: the default
// lease is at most 10 s.
func TestDefaultLeaseRecoversInSeconds(t *testing.T) {
	t.Parallel()
	assert.LessOrEqual(t, dedup.DefaultLease, 10*time.Second)
}

// defaultGroup is a Group on env with the default lease and renewal.
func (env memEnv) defaultGroup(opts ...dedup.Option) *dedup.Group {
	env.t.Helper()
	g, err := dedup.New(env.m, env.m, append([]dedup.Option{dedup.WithClock(env.clock)}, opts...)...)
	require.NoError(env.t, err)
	return g
}

// inProgress returns the *InProgressError that err must be.
func inProgress(t *testing.T, err error) *dedup.InProgressError {
	t.Helper()
	var busy *dedup.InProgressError
	require.ErrorAs(t, err, &busy)
	require.ErrorIs(t, err, dedup.ErrInProgress)
	return busy
}

// A worker that crashed mid-job (its lock, taken with the default lease,
// is never renewed) holds the job up for the lease left, which the
// duplicate's InProgressError says: delivered again after RetryAfter, the
// job runs, and not a millisecond before.
func TestCrashedWorkerRecoveredAfterRetryAfter(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	g := env.defaultGroup()
	_, err := env.m.Obtain(ctx, lease.Key(dedup.DefaultPrefix, "j"), dedup.DefaultLease, lease.WithHolder("crashed"))
	require.NoError(t, err)
	env.clock.Advance(2 * time.Second) // the worker crashed 2 s into its lease
	c := newCounted()
	_, err = g.Do(ctx, "j", c.job("j"))
	busy := inProgress(t, err)
	assert.Equal(t, "crashed", busy.Holder)
	assert.Equal(t, dedup.DefaultLease-2*time.Second, busy.TTL)
	assert.Equal(t, busy.TTL+time.Millisecond, busy.RetryAfter)

	env.clock.Advance(busy.RetryAfter - 2*time.Millisecond)
	_, err = g.Do(ctx, "j", c.job("j"))
	assert.Equal(t, 2*time.Millisecond, inProgress(t, err).RetryAfter, "2 ms before RetryAfter")
	env.clock.Advance(2 * time.Millisecond)
	r, err := g.Do(ctx, "j", c.job("j"))
	require.NoError(t, err)
	assert.True(t, r.Ran, "delivered again after RetryAfter")
}

// A live worker's long job is renewed, with the default lease, for as long
// as it runs; a worker that delivers its duplicate again after each
// RetryAfter asks about once per two thirds of a lease, not in a loop, and
// gets the outcome once the job is done.
func TestRedeliveryFollowsRetryAfter(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	g := env.defaultGroup(dedup.WithHolder("live"))
	const runFor = 10 * dedup.DefaultLease
	running := make(chan struct{})
	finish := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, "long", func(ctx context.Context, _ int64) ([]byte, error) {
			close(running)
			select {
			case <-finish:
				return []byte("done"), nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		})
		done <- err
	}()
	<-running
	env.waitTimers(2) // the run's renewal and lease watchdog
	start := env.clock.Now()
	step := dedup.DefaultLease / 3 // the renewal interval: every renewal fires on time
	deliveries := 0
	for env.clock.Now().Sub(start) < runFor {
		deliveries++
		_, err := g.Do(ctx, "long", newCounted().job("long"))
		busy := inProgress(t, err)
		require.Equal(t, "live", busy.Holder)
		require.Greater(t, busy.RetryAfter, dedup.DefaultLease/2, "the lease is renewed every third of it")
		require.LessOrEqual(t, busy.RetryAfter, dedup.DefaultLease+time.Millisecond)
		for wait := busy.RetryAfter; wait > 0; wait -= min(wait, step) {
			env.clock.Advance(min(wait, step))
		}
	}
	assert.LessOrEqual(t, deliveries, int(runFor/(2*dedup.DefaultLease/3))+1, "deliveries in %v", runFor)
	close(finish)
	require.NoError(t, <-done)
	r, err := g.Do(ctx, "long", newCounted().job("long"))
	require.NoError(t, err)
	assert.False(t, r.Ran)
	assert.Equal(t, "done", string(r.Value))
}

// blindLocker is a Locker whose Inspect fails: who holds a lock is unknown.
type blindLocker struct{ *leasetest.Memory }

func (blindLocker) Inspect(context.Context, string) (lease.Info, error) {
	return lease.Info{}, errors.New("inspect: unreachable")
}

// When the lease left is unknown, RetryAfter is the Group's whole lease:
// a crashed worker's job is free by then.
func TestRetryAfterUnknownLease(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	g, err := dedup.New(blindLocker{env.m}, env.m, dedup.WithClock(env.clock), dedup.WithLease(4*time.Second))
	require.NoError(t, err)
	_, err = env.m.Obtain(ctx, lease.Key(dedup.DefaultPrefix, "j"), 4*time.Second)
	require.NoError(t, err)
	_, err = g.Do(ctx, "j", newCounted().job("j"))
	busy := inProgress(t, err)
	assert.Zero(t, busy.TTL)
	assert.Equal(t, 4*time.Second, busy.RetryAfter)
}
