package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redisproc"
	"github.com/redislock-go/redislock/internal/redistest"
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
	ctx := ctxT(t, 20*time.Second)
	rdb := s.Client(nil)
	c, other := newClient(t, rdb), newClient(t, s.Client(nil))
	key := t.Name()
	l, err := c.Obtain(ctx, key, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Obtain(ctx, key, time.Second); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("second Obtain = %v, want ErrNotObtained", err)
	}
	if err := l.Refresh(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	err = c.Run(ctx, key, 600*time.Millisecond, func(ctx context.Context, l *redislock.Lock) error {
		renewedAfter(t, l, l.ValidUntil(), 5*time.Second)
		return ctx.Err()
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
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
	tctx := ctxT(t, time.Minute)
	ctx := tctx
	c, other := newClient(t, s.Client(nil)), newClient(t, s.Client(nil))
	key := t.Name()
	const ttl = 10 * time.Second
	old, err := s.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
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
		eventually(t, 5*time.Second, "the replica has the grant", func() bool { return holds(t, replicaOf(s, old), key, l.Token()) })
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
		if err != nil {
			t.Fatal(err)
		}
		if p == old || !holds(t, p, key, l.Token()) {
			t.Fatalf("the new primary %s (old %s) does not hold the lock", p.Addr(), old.Addr())
		}
		renewedAfter(t, l, validityFrom(time.Now(), ttl), 2*ttl)
		if d := pttl(t, p, key); d < ttl/2 {
			t.Fatalf("PTTL on the new primary %v after a renewal of %v", d, ttl)
		}
		return ctx.Err()
	})
	if err != nil {
		t.Fatalf("Run across a Sentinel failover = %v, want the lock kept", err)
	}
	g := <-waiter
	switch {
	case g.err != nil:
		t.Fatalf("waiter across the failover: %v", g.err)
	case g.early:
		t.Fatal("the waiter was granted the lock while Run's fn still held it")
	case g.l.Fence() <= fence:
		t.Fatalf("waiter's fence %d after %d", g.l.Fence(), fence)
	}
	if err := g.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
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
	ctx := ctxT(t, 40*time.Second)
	c, other := newClient(t, s.Client(nil)), newClient(t, s.Client(nil))
	key := t.Name()
	old, err := s.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replica := replicaOf(s, old)
	defer replica.Resume()
	replica.Pause()
	if _, err := old.Do(ctx, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
		t.Fatal(err)
	}
	err = c.Run(ctx, key, 6*time.Second, func(ctx context.Context, l *redislock.Lock) error {
		loss := watchLoss(ctx, l)
		old.Kill()
		until := l.ValidUntil() // no renewal can be confirmed from here on
		replica.Resume()
		p, err := s.Failover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p != replica {
			t.Fatalf("new primary %s, want %s", p.Addr(), replica.Addr())
		}
		if v, err := p.Do(ctx, "EXISTS", redislock.LockKey(key)); err != nil || v != int64(0) {
			t.Fatalf("the promoted replica has the lock (%v, %v): the fault did not happen", v, err)
		}
		loss.before(t, until, redislock.ErrNotHeld)
		l2, err := other.Obtain(context.Background(), key, time.Second)
		if err != nil {
			t.Fatalf("Obtain after the loss = %v", err)
		}
		if l2.Fence() <= l.Fence() {
			t.Errorf("fence %d after %d: fences went backwards on the new primary", l2.Fence(), l.Fence())
		}
		return l2.Release(context.Background())
	})
	if !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("Run = %v, want ErrLockLost", err)
	}
}

// With WithReplicas a grant is returned only once the replica has it: read
// on the replica right after Obtain, it is there.
func sentinelReplicasAcked(t *testing.T, s *redistest.Sentinel) {
	ctx := ctxT(t, 20*time.Second)
	c := newClient(t, s.Client(nil), redislock.WithReplicas(1, 2*time.Second))
	p, err := s.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replica := replicaOf(s, p)
	l, err := c.Obtain(ctx, t.Name(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !holds(t, replica, t.Name(), l.Token()) {
		t.Fatal("Obtain returned before the replica had the grant")
	}
	if err := l.Refresh(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// One replica is all there is: two never acknowledge.
	if _, err := c.Obtain(ctx, t.Name()+"-two", 5*time.Second, redislock.WithReplicas(2, 50*time.Millisecond)); !errors.As(err, new(*redislock.ReplicaError)) {
		t.Fatalf("Obtain wanting 2 replicas = %v, want a ReplicaError", err)
	}
	// A waiter of the same Client is not handed the lock (a handoff
	// would skip the WAIT): it obtains it itself, acknowledged.
	got := make(chan *redislock.Lock, 1)
	go func() {
		l2, err := c.Obtain(ctx, t.Name(), 5*time.Second, redislock.WithRetry(redislock.LinearBackoff(20*time.Millisecond)))
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	eventually(t, 5*time.Second, "the waiter waits", func() bool { n, _ := redislock.LocalWaiters(c, t.Name()); return n == 1 })
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		return
	}
	defer l2.Release(ctx)
	if redislock.Handoffs(l2) != 0 {
		t.Fatal("a waiter with WithReplicas was handed the lock without WAIT")
	}
	if !holds(t, replica, t.Name(), l2.Token()) {
		t.Fatal("the waiter's grant returned before the replica had it")
	}
}

// A grant the (paused) replica does not acknowledge is released and not
// returned; a refresh it does not acknowledge is an error that leaves
// ValidUntil; renewals it does not acknowledge end in the loss, reported
// before ValidUntil.
func sentinelReplicasUnacked(t *testing.T, s *redistest.Sentinel) {
	ctx := ctxT(t, 30*time.Second)
	rdb := s.Client(nil)
	c := newClient(t, rdb, redislock.WithReplicas(1, 100*time.Millisecond))
	p, err := s.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replica := replicaOf(s, p)
	key := t.Name()
	kept, err := c.Obtain(ctx, key+"-held", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
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
		t.Fatal(err)
	}
	replica.Pause()
	defer replica.Resume()
	until := runLock.ValidUntil() // no renewal can be acknowledged from here on

	_, err = c.Obtain(ctx, key, 10*time.Second)
	var re *redislock.ReplicaError
	if !errors.As(err, &re) || !errors.Is(err, redislock.ErrNotReplicated) || re.Want != 1 || re.Acked != 0 {
		t.Fatalf("Obtain with the replica paused = %v, want a ReplicaError (0 of 1)", err)
	}
	if held(ctx, rdb, redislock.LockKey(key)) {
		t.Fatal("the unacknowledged grant was not released")
	}
	before := kept.ValidUntil()
	if err := kept.Refresh(ctx, 10*time.Second); !errors.Is(err, redislock.ErrNotReplicated) {
		t.Fatalf("Refresh with the replica paused = %v, want ErrNotReplicated", err)
	}
	if !kept.ValidUntil().Equal(before) {
		t.Fatal("an unacknowledged Refresh moved ValidUntil")
	}
	loss.before(t, until, redislock.ErrLeaseExpired)
	if err := <-run; !errors.Is(err, redislock.ErrLockLost) || !errors.Is(err, redislock.ErrNotReplicated) {
		t.Fatalf("Run = %v, want ErrLockLost with ErrNotReplicated", err)
	}
	replica.Resume()
	eventually(t, 10*time.Second, "an acknowledged refresh", func() bool { return kept.Refresh(ctx, 10*time.Second) == nil })
}

// SENTINEL FAILOVER while Run holds a lock obtained and renewed with
// WithReplicas: the promoted replica has it (the grant was acknowledged),
// renewals go on there, acknowledged by the old primary now its replica.
func sentinelReplicasFailover(t *testing.T, s *redistest.Sentinel) {
	tctx := ctxT(t, 60*time.Second)
	c := newClient(t, s.Client(nil), redislock.WithReplicas(1, time.Second))
	key := t.Name()
	old, err := s.Primary(tctx)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 9 * time.Second
	err = c.Run(tctx, key, ttl, func(ctx context.Context, l *redislock.Lock) error {
		replica := replicaOf(s, old)
		if !holds(t, replica, key, l.Token()) {
			t.Fatal("the replica lacks an acknowledged grant")
		}
		p, err := s.Failover(tctx)
		if err != nil {
			t.Fatal(err)
		}
		if p != replica {
			t.Fatalf("new primary %s, want %s", p.Addr(), replica.Addr())
		}
		if ctx.Err() != nil {
			t.Fatalf("lost during the failover: %v", context.Cause(ctx))
		}
		renewedAfter(t, l, validityFrom(time.Now(), ttl), 15*time.Second)
		if !holds(t, old, key, l.Token()) {
			t.Fatal("a renewal acknowledged before the old primary, now a replica, had it")
		}
		return context.Cause(ctx)
	})
	if err != nil {
		t.Fatalf("Run across a Sentinel failover = %v, want the lock kept", err)
	}
}

// SENTINEL FAILOVER while Run holds a lock with WithReplicas whose lease
// is shorter than the time the promoted master has no replica (the
// sentinels turn the old primary into its replica only after 4 of their
// publish periods, 1 s each here and 2 s by default, then it resyncs):
// no renewal can be acknowledged, and the lock is reported lost before
// its ValidUntil, Run's error matching ErrLockLost and ErrNotReplicated,
// as docs/redis-deployments.md says.
func sentinelReplicasFailoverShortLease(t *testing.T, s *redistest.Sentinel) {
	tctx := ctxT(t, 60*time.Second)
	c := newClient(t, s.Client(nil), redislock.WithReplicas(1, time.Second))
	err := c.Run(tctx, t.Name(), 1500*time.Millisecond, func(ctx context.Context, l *redislock.Lock) error {
		loss := watchLoss(ctx, l)
		until := l.ValidUntil() // the last acknowledged renewal may come before the promotion
		if _, err := s.Failover(tctx); err != nil {
			t.Fatal(err)
		}
		loss.before(t, until, redislock.ErrLeaseExpired)
		if !errors.Is(context.Cause(ctx), redislock.ErrNotReplicated) {
			t.Errorf("cause of the loss = %v, want ErrNotReplicated", context.Cause(ctx))
		}
		return nil
	})
	if !errors.Is(err, redislock.ErrLockLost) || !errors.Is(err, redislock.ErrNotReplicated) {
		t.Fatalf("Run across a failover with a short lease = %v, want ErrLockLost with ErrNotReplicated", err)
	}
}
