package semaphore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/semaphore"
)

// The semaphore under server clock steps: real redis-servers under
// libfaketime (redistest.StartClock). The package doc's Server time and
// docs/limitations.md's Clocks state what these show.

// A waiter that died holds up the queue for at most the queue TTL after
// its last attempt, also when the server's clock steps back meanwhile.
func TestClockStepBackQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.StartClock(t)
	rdb := srv.Client(nil)
	ctx := context.Background()
	const qttl = time.Second
	q := watchQueued()
	s := newSem(t, rdb, "back", 1, semaphore.WithQueueTTL(qttl), q.option())
	p := try(t, s, time.Minute)
	// An Acquire's attempt, after which its process died: it heads the queue.
	keys := semaphore.Keys(s)
	r, err := script.SemAcquire{Keys: keys, Token: "dead", TTL: time.Minute.Milliseconds(), Limit: 1,
		QueueTTL: qttl.Milliseconds(), FenceTTL: time.Minute.Milliseconds(), Wake: keys[0] + ":wake"}.Run(ctx, rdb)
	require.NoError(t, err)
	require.Equal(t, script.SemQueued, r.Status)

	type result struct {
		p   *semaphore.Permit
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		// waitBound: the queue TTL and a loaded machine's delays, not the step.
		actx, cancel := context.WithTimeout(ctx, waitBound)
		defer cancel()
		p, err := s.Acquire(actx, time.Minute)
		got <- result{p, err, time.Now()}
	}()
	q.wait(t, 1)
	srv.Step(-time.Hour)
	q.wait(t, q.count()+2) // an attempt that started after the step

	released := time.Now()
	require.NoError(t, p.Release(ctx))
	res := <-got
	require.NoError(t, res.err, "live waiter behind a dead one after a step back")
	t.Logf("the live waiter got the slot %v after the release", res.at.Sub(released).Round(time.Millisecond))
	assert.Greater(t, res.p.Fence(), p.Fence())
}

// A server clock stepped back while permits are held keeps each lease
// ending when it would have (a dead holder's slot frees after its lease,
// not the step), and a live holder renews as before.
func TestClockStepBackLease(t *testing.T) {
	t.Parallel()
	srv := redistest.StartClock(t)
	rdb := srv.Client(nil)
	ctx := context.Background()
	s := newSem(t, rdb, "lease", 2)
	live := try(t, s, time.Minute)
	dead := try(t, s, 2*time.Second) // never renewed nor released
	srv.Step(-time.Hour)

	info, err := s.Inspect(ctx)
	require.NoError(t, err)
	require.Len(t, info.Holders, 2)
	for _, h := range info.Holders {
		lease := map[int]time.Duration{live.Slot(): time.Minute, dead.Slot(): 2 * time.Second}[h.Slot]
		assert.LessOrEqual(t, h.TTL, lease, "slot %d's lease left after the step back", h.Slot)
		assert.GreaterOrEqual(t, h.Age, time.Duration(0), "slot %d's age after the step back", h.Slot)
	}
	ttl, err := live.TTL(ctx)
	require.NoError(t, err)
	assert.LessOrEqual(t, ttl, time.Minute)
	require.NoError(t, live.Refresh(ctx, time.Minute))

	actx, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	p, err := s.Acquire(actx, time.Minute)
	require.NoError(t, err, "Acquire behind a dead holder after a step back")
	assert.Equal(t, dead.Slot(), p.Slot())
	assert.ErrorIs(t, dead.Refresh(ctx, time.Minute), lease.ErrNotHeld)
}

// A server clock stepped forward ends at once every lease with less time
// left than the step: the slots are granted again while their former
// holders' validity lasts, so a limit of 2 has 4 valid permits (a plain
// lock has two holders under the same step: the root's
// TestClockServerStepForwardHeld). The new permits are still 2 at most;
// each slot's fence increases, so a resource that keeps the newest fence
// per slot refuses the former holders, whose next renewal reports the loss.
func TestClockStepForwardPermits(t *testing.T) {
	t.Parallel()
	srv := redistest.StartClock(t)
	rdb := srv.Client(nil)
	ctx := context.Background()
	s := newSem(t, rdb, "fwd", 2)
	old := []*semaphore.Permit{try(t, s, 30*time.Second), try(t, s, 30*time.Second)}
	srv.Step(time.Minute)
	fresh := []*semaphore.Permit{try(t, s, 30*time.Second), try(t, s, 30*time.Second)}
	_, err := s.TryAcquire(ctx, 30*time.Second)
	require.ErrorIs(t, err, lease.ErrNotObtained, "a fifth permit")
	now := time.Now()
	if !now.Before(old[0].ValidUntil()) || !now.Before(old[1].ValidUntil()) {
		t.Skip("the machine took 30 s: the first permits' validity ended anyway")
	}
	// Four permits valid at once on a limit of 2: the documented limit.
	for i := range fresh {
		require.Equal(t, old[i].Slot(), fresh[i].Slot())
		assert.Greater(t, fresh[i].Fence(), old[i].Fence())
		res := fmt.Sprintf("res:slot%d", fresh[i].Slot())
		require.NoError(t, redislock.FencedSet(ctx, rdb, res, "fresh", fresh[i].Fence(), time.Minute))
		assert.ErrorIs(t, redislock.FencedSet(ctx, rdb, res, "old", old[i].Fence(), time.Minute), redislock.ErrStaleFence)
		assert.ErrorIs(t, old[i].Refresh(ctx, 30*time.Second), lease.ErrNotHeld)
	}
}
