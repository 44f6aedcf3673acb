package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redisproc"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testSentinel runs the lock through Sentinel failover clients
// (redis.NewFailoverClient) on a primary, a replica and three sentinels on
// loopback, then across two failovers: one to a replica that has the
// grant (kept) and one to a replica that never received it (lost, and
// reported). One deployment serves all subtests; each uses keys of its own.
func testSentinel(t *testing.T) {
	s := redistest.StartSentinel(t, redisproc.SentinelConfig{})
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, s *redistest.Sentinel)
	}{
		{"Lock", sentinelLock},
		{"ReplicasAcked", sentinelReplicasAcked},
		{"ReplicasUnacked", sentinelReplicasUnacked},
		{"ReplicasFailover", sentinelReplicasFailover},
		{"ReplicasFailoverShortLease", sentinelReplicasFailoverShortLease},
		{"FailoverKeepsLock", sentinelFailoverKeepsLock},
		{"FailoverLosesUnreplicatedGrant", sentinelFailoverLosesGrant}, // last: kills the primary
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, s) })
	}
}

// replicaOf returns a data server of s other than p.
func replicaOf(s *redistest.Sentinel, p *redisproc.Server) *redisproc.Server {
	for _, d := range s.Servers() {
		if d != p {
			return d
		}
	}
	return nil
}

func sentinelLock(t *testing.T, s *redistest.Sentinel) {
	ctx := testkit.Context(t)
	rdb := s.Client(nil)
	c, other := newClient(t, rdb), newClient(t, s.Client(nil))
	key := t.Name()
	l, err := c.Obtain(ctx, key, 5*time.Second)
	require.NoError(t, err)
	if _, err := other.Obtain(ctx, key, time.Second); !errors.Is(err, redislock.ErrNotObtained) {
		require.Fail(t, fmt.Sprintf("second Obtain = %v, want ErrNotObtained", err))
	}
	require.NoError(t, l.Refresh(ctx, 10*time.Second))
	require.NoError(t, l.Release(ctx))
	err = c.Run(ctx, key, 600*time.Millisecond, func(ctx context.Context, l *redislock.Lock) error {
		renewedAfter(t, l, l.ValidUntil(), 5*time.Second)
		return ctx.Err()
	})
	require.NoError(t, err, "Run")
	checkNoLostWakeup(t, rdb, 5)
}

// SENTINEL FAILOVER while Run holds the lock, the replica having received
// the grant: the promoted replica holds it, the holder's renewals reach
// it once its failover client has switched (go-redis asks the sentinels),
// fn runs on undisturbed, and a waiter that waited across the failover is
// granted only after Run released the lock, with a higher fence.
//
// Until the failover client has switched, the renewals go to the old
// primary, which stays a writable master until the sentinels repoint it:
// the new primary's copy of the key lives on the TTL of the last renewal
// it replicated. The lease is kept only if the client switches within
// that TTL. On a loaded machine two of the three sentinels heard of the
// switch about 2 s after the promotion, and a 3 s lease was lost in one
// run of five; with 10 s the switch has room to be late.
func sentinelFailoverKeepsLock(t *testing.T, s *redistest.Sentinel) {
	tctx := testkit.Context(t)
	ctx := tctx
	c, other := newClient(t, s.Client(nil)), newClient(t, s.Client(nil))
	key := t.Name()
	const ttl = 10 * time.Second
	old, err := s.Primary(ctx)
	require.NoError(t, err)
	type grant struct {
		l     *redislock.Lock
		err   error
		early bool // granted while fn still ran
	}
	waiter := make(chan grant, 1)
	fnDone := make(chan struct{})
	var fence int64
	err = c.Run(ctx, key, ttl, func(ctx context.Context, l *redislock.Lock) error {
		defer close(fnDone) // before Run releases the lock
		fence = l.Fence()
		require.Eventually(t, func() bool { return holds(t, replicaOf(s, old), key, l.Token()) }, 5*time.Second, 5*time.Millisecond, "the replica has the grant")
		go func() {
			l2, err := other.Obtain(tctx, key, ttl, redislock.WithRetry(redislock.LinearBackoff(50*time.Millisecond)))
			g := grant{l: l2, err: err}
			select {
			case <-fnDone:
			default:
				g.early = true
			}
			waiter <- g
		}()
		p, err := s.Failover(ctx)
		require.NoError(t, err)
		require.NotSame(t, old, p, "the new primary %s (old %s) does not hold the lock", p.Addr(), old.Addr())
		require.True(t, holds(t, p, key, l.Token()), "the new primary %s (old %s) does not hold the lock", p.Addr(), old.Addr())
		renewedAfter(t, l, validityFrom(time.Now(), ttl), 2*ttl)
		require.GreaterOrEqual(t, pttl(t, p, key), ttl/2, "PTTL on the new primary after a renewal of %v", ttl)
		return ctx.Err()
	})
	require.NoError(t, err, "Run across a Sentinel failover, want the lock kept")
	g := <-waiter
	switch {
	case g.err != nil:
		require.Fail(t, fmt.Sprintf("waiter across the failover: %v", g.err))
	case g.early:
		require.Fail(t, "the waiter was granted the lock while Run's fn still held it")
	case g.l.Fence() <= fence:
		require.Fail(t, fmt.Sprintf("waiter's fence %d after %d", g.l.Fence(), fence))
	}
	require.NoError(t, g.l.Release(ctx))
}

// A failover to a replica that never received the grant: the replica is
// paused and cut off (CLIENT KILL TYPE replica) before Run obtains the
// lock, the primary is killed, and the sentinels promote the replica
// (SENTINEL FAILOVER) without the lock. The holder's failover client
// redials through the sentinels, its next renewal finds no grant on the
// new primary, and fn's context is cancelled with ErrNotHeld before
// ValidUntil; Run returns ErrLockLost. Another client may take the lock as
// soon as the new primary serves (both believe they hold it until the old
// holder's renewal), with a higher fence.
func sentinelFailoverLosesGrant(t *testing.T, s *redistest.Sentinel) {
	ctx := testkit.Context(t)
	c, other := newClient(t, s.Client(nil)), newClient(t, s.Client(nil))
	key := t.Name()
	old, err := s.Primary(ctx)
	require.NoError(t, err)
	replica := replicaOf(s, old)
	defer replica.Resume()
	replica.Pause()
	_, err = old.Do(ctx, "CLIENT", "KILL", "TYPE", "replica")
	require.NoError(t, err)
	// The failover is the test's doing, bounded by the test's ctx: fn's
	// ends at the loss, which may come before Failover sees the sentinels
	// agree.
	err = c.Run(ctx, key, 6*time.Second, func(fnCtx context.Context, l *redislock.Lock) error {
		loss := watchLoss(fnCtx, l)
		old.Kill()
		until := l.ValidUntil() // no renewal can be confirmed from here on
		replica.Resume()
		p, err := s.Failover(ctx)
		require.NoError(t, err)
		require.Same(t, replica, p, "new primary %s, want %s", p.Addr(), replica.Addr())
		v, err := p.Do(ctx, "EXISTS", redislock.LockKey(key))
		require.False(t, err != nil || v != int64(0), "the promoted replica has the lock (%v, %v): the fault did not happen", v, err)
		loss.before(t, until, redislock.ErrNotHeld)
		l2, err := other.Obtain(context.Background(), key, time.Second)
		require.NoError(t, err, "Obtain after the loss")
		assert.Greater(t, l2.Fence(), l.Fence(), "fence after %d: fences went backwards on the new primary", l.Fence())
		return l2.Release(context.Background())
	})
	require.ErrorIs(t, err, redislock.ErrLockLost, "Run, want ErrLockLost")
}

// With WithReplicas a grant is returned only once the replica has it: read
// on the replica right after Obtain, it is there.
func sentinelReplicasAcked(t *testing.T, s *redistest.Sentinel) {
	ctx := testkit.Context(t)
	c := newClient(t, s.Client(nil), redislock.WithReplicas(1, 2*time.Second))
	p, err := s.Primary(ctx)
	require.NoError(t, err)
	replica := replicaOf(s, p)
	l, err := c.Obtain(ctx, t.Name(), 5*time.Second)
	require.NoError(t, err)
	require.True(t, holds(t, replica, t.Name(), l.Token()), "Obtain returned before the replica had the grant")
	require.NoError(t, l.Refresh(ctx, 5*time.Second))
	// One replica is all there is: two never acknowledge.
	if _, err := c.Obtain(ctx, t.Name()+"-two", 5*time.Second, redislock.WithReplicas(2, 50*time.Millisecond)); !errors.As(err, new(*redislock.ReplicaError)) {
		require.Fail(t, fmt.Sprintf("Obtain wanting 2 replicas = %v, want a ReplicaError", err))
	}
	// A waiter of the same Client is not handed the lock (a handoff
	// would skip the WAIT): it obtains it itself, acknowledged.
	got := make(chan *redislock.Lock, 1)
	go func() {
		l2, err := c.Obtain(ctx, t.Name(), 5*time.Second, redislock.WithRetry(redislock.LinearBackoff(20*time.Millisecond)))
		assert.NoError(t, err)
		got <- l2
	}()
	require.Eventually(t, func() bool { n, _ := redislock.LocalWaiters(c, t.Name()); return n == 1 }, 5*time.Second, 5*time.Millisecond, "the waiter waits")
	require.NoError(t, l.Release(ctx))
	l2 := <-got
	if l2 == nil {
		return
	}
	defer l2.Release(ctx)
	require.Equal(t, 0, redislock.Handoffs(l2), "a waiter with WithReplicas was handed the lock without WAIT")
	require.True(t, holds(t, replica, t.Name(), l2.Token()), "the waiter's grant returned before the replica had it")
}

// A grant the (paused) replica does not acknowledge is released and not
// returned; a refresh it does not acknowledge is an error that leaves
// ValidUntil; renewals it does not acknowledge end in the loss, reported
// before ValidUntil.
func sentinelReplicasUnacked(t *testing.T, s *redistest.Sentinel) {
	ctx := testkit.Context(t)
	rdb := s.Client(nil)
	c := newClient(t, rdb, redislock.WithReplicas(1, 100*time.Millisecond))
	p, err := s.Primary(ctx)
	require.NoError(t, err)
	replica := replicaOf(s, p)
	key := t.Name()
	kept, err := c.Obtain(ctx, key+"-held", 10*time.Second)
	require.NoError(t, err)
	defer kept.Release(context.Background())
	const ttl = 1500 * time.Millisecond
	run := make(chan error, 1)
	started := make(chan *lossWatch, 1)
	var runLock *redislock.Lock
	go func() {
		run <- c.Run(ctx, key+"-run", ttl, func(ctx context.Context, l *redislock.Lock) error {
			runLock = l
			started <- watchLoss(ctx, l)
			<-ctx.Done()
			return nil
		})
	}()
	var loss *lossWatch
	select {
	case loss = <-started:
	case err := <-run:
		require.Fail(t, "Run returned before the loss", "%v", err)
	}
	replica.Pause()
	defer replica.Resume()
	until := runLock.ValidUntil() // no renewal can be acknowledged from here on

	_, err = c.Obtain(ctx, key, 10*time.Second)
	var re *redislock.ReplicaError
	require.ErrorAs(t, err, &re, "Obtain with the replica paused, want a ReplicaError (0 of 1)")
	require.ErrorIs(t, err, redislock.ErrNotReplicated, "Obtain with the replica paused, want a ReplicaError (0 of 1)")
	require.Equal(t, 1, re.Want, "Obtain with the replica paused = %v, want a ReplicaError (0 of 1)", err)
	require.Equal(t, 0, re.Acked, "Obtain with the replica paused = %v, want a ReplicaError (0 of 1)", err)
	require.False(t, held(ctx, rdb, redislock.LockKey(key)), "the unacknowledged grant was not released")
	before := kept.ValidUntil()
	require.ErrorIs(t, kept.Refresh(ctx, 10*time.Second), redislock.ErrNotReplicated, "Refresh with the replica paused, want ErrNotReplicated")
	require.True(t, kept.ValidUntil().Equal(before), "an unacknowledged Refresh moved ValidUntil")
	loss.before(t, until, redislock.ErrLeaseExpired)
	err = <-run
	require.ErrorIs(t, err, redislock.ErrLockLost, "Run, want ErrLockLost with ErrNotReplicated")
	require.ErrorIs(t, err, redislock.ErrNotReplicated, "Run, want ErrLockLost with ErrNotReplicated")
	replica.Resume()
	require.Eventually(t, func() bool { return kept.Refresh(ctx, 10*time.Second) == nil }, 10*time.Second, 5*time.Millisecond, "an acknowledged refresh")
}

// SENTINEL FAILOVER while Run holds a lock obtained and renewed with
// WithReplicas: the promoted replica has it (the grant was acknowledged),
// renewals go on there, acknowledged by the old primary now its replica.
func sentinelReplicasFailover(t *testing.T, s *redistest.Sentinel) {
	tctx := testkit.Context(t)
	c := newClient(t, s.Client(nil), redislock.WithReplicas(1, time.Second))
	key := t.Name()
	old, err := s.Primary(tctx)
	require.NoError(t, err)
	const ttl = 9 * time.Second
	err = c.Run(tctx, key, ttl, func(ctx context.Context, l *redislock.Lock) error {
		replica := replicaOf(s, old)
		require.True(t, holds(t, replica, key, l.Token()), "the replica lacks an acknowledged grant")
		p, err := s.Failover(tctx)
		require.NoError(t, err)
		require.Same(t, replica, p, "new primary %s, want %s", p.Addr(), replica.Addr())
		require.NoError(t, ctx.Err(), "lost during the failover: %v", context.Cause(ctx))
		renewedAfter(t, l, validityFrom(time.Now(), ttl), 15*time.Second)
		require.True(t, holds(t, old, key, l.Token()), "a renewal acknowledged before the old primary, now a replica, had it")
		return context.Cause(ctx)
	})
	require.NoError(t, err, "Run across a Sentinel failover, want the lock kept")
}

// SENTINEL FAILOVER while Run holds a lock with WithReplicas whose lease
// is shorter than the time the promoted master has no replica (the
// sentinels turn the old primary into its replica only after 4 of their
// publish periods, 1 s each here and 2 s by default, then it resyncs):
// no renewal can be acknowledged, and the lock is reported lost before
// its ValidUntil, Run's error matching ErrLockLost and ErrNotReplicated,
// as docs/redis-deployments.md says.
func sentinelReplicasFailoverShortLease(t *testing.T, s *redistest.Sentinel) {
	tctx := testkit.Context(t)
	c := newClient(t, s.Client(nil), redislock.WithReplicas(1, time.Second))
	err := c.Run(tctx, t.Name(), 1500*time.Millisecond, func(ctx context.Context, l *redislock.Lock) error {
		loss := watchLoss(ctx, l)
		until := l.ValidUntil() // the last acknowledged renewal may come before the promotion
		_, err := s.Failover(tctx)
		require.NoError(t, err)
		loss.before(t, until, redislock.ErrLeaseExpired)
		assert.ErrorIs(t, context.Cause(ctx), redislock.ErrNotReplicated, "cause of the loss, want ErrNotReplicated")
		return nil
	})
	require.ErrorIs(t, err, redislock.ErrLockLost, "Run across a failover with a short lease, want ErrLockLost with ErrNotReplicated")
	require.ErrorIs(t, err, redislock.ErrNotReplicated, "Run across a failover with a short lease, want ErrLockLost with ErrNotReplicated")
}
