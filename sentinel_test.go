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

// TestSentinel runs the lock through Sentinel failover clients
// (redis.NewFailoverClient) on a primary, a replica and three sentinels on
// loopback, then across two failovers: one to a replica that has the
// grant (kept) and one to a replica that never received it (lost, and
// reported). One deployment serves all subtests; each uses keys of its own.
func TestSentinel(t *testing.T) {
	s := redistest.StartSentinel(t, redisproc.SentinelConfig{})
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, s *redistest.Sentinel)
	}{
		{"Lock", sentinelLock},
		{"ReplicasAcked", sentinelReplicasAcked},
		{"ReplicasUnacked", sentinelReplicasUnacked},
		{"ReplicasFailover", sentinelReplicasFailover},
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
func sentinelFailoverKeepsLock(t *testing.T, s *redistest.Sentinel) {
	tctx := ctxT(t, 40*time.Second)
	ctx := tctx
	c, other := newClient(t, s.Client(nil)), newClient(t, s.Client(nil))
	key := t.Name()
	const ttl = 3 * time.Second
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
		renewedAfter(t, l, validityFrom(time.Now(), ttl), 10*time.Second)
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
