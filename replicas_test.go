package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

func TestReplicasInvalid(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	ctx := ctxT(t, 5*time.Second)
	c := newClient(t, rdb)
	for _, opt := range []redislock.Option{redislock.WithReplicas(-1, time.Second), redislock.WithReplicas(1, 0),
		redislock.WithReplicas(1, time.Microsecond)} {
		if _, err := c.Obtain(ctx, "k", time.Second, opt); !errors.Is(err, redislock.ErrInvalidArgument) {
			t.Errorf("Obtain = %v, want ErrInvalidArgument", err)
		}
	}
	if _, err := c.ObtainMulti(ctx, []string{"a", "b"}, time.Second, redislock.WithReplicas(1, time.Second)); !errors.Is(err, redislock.ErrInvalidArgument) {
		t.Errorf("ObtainMulti = %v, want ErrInvalidArgument", err)
	}
	if _, err := redislock.NewQuorum([]redis.UniversalClient{rdb}, redislock.WithReplicas(1, time.Second)); !errors.Is(err, redislock.ErrInvalidArgument) {
		t.Errorf("NewQuorum = %v, want ErrInvalidArgument", err)
	}
	// 0: off, whatever the timeout.
	l, err := c.Obtain(ctx, "k", time.Second, redislock.WithReplicas(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
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
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
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
	tctx := ctxT(t, 40*time.Second)
	c := newClient(t, s.Client(nil), redislock.WithReplicas(1, time.Second))
	key := t.Name()
	old, err := s.Primary(tctx)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 6 * time.Second
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
		renewedAfter(t, l, validityFrom(time.Now(), ttl), 10*time.Second)
		if !holds(t, old, key, l.Token()) {
			t.Fatal("a renewal acknowledged before the old primary, now a replica, had it")
		}
		return context.Cause(ctx)
	})
	if err != nil {
		t.Fatalf("Run across a Sentinel failover = %v, want the lock kept", err)
	}
}
