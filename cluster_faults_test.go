package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redisproc"
)

// Faults of a real Redis Cluster under a held lock (subtests of
// TestCluster, on its shared cluster). What each one shows is what the
// README's "Redis Cluster and Sentinel" section states.

// validityFrom is when a renewal started at start is valid until, at
// the default drift (TTL/100 + 2 ms): renewedAfter(l, validityFrom(now,
// ttl)) waits for a renewal that started after now.
func validityFrom(start time.Time, ttl time.Duration) time.Time {
	return start.Add(ttl - ttl/100 - 2*time.Millisecond)
}

// A lock held by Run while its slot moves to another master (MIGRATING/
// IMPORTING, MIGRATE of its keys, SETSLOT NODE) is kept: the renewals
// follow the slot (ASK, then MOVED), the lock stays exclusive, and its
// fence counter moves with it, so the next grant's fence is higher.
func clusterSlotMigration(t *testing.T, rc realCluster) {
	ctx := ctxT(t, 30*time.Second)
	c, other := newClient(t, rc.rdb), newClient(t, rc.rdb)
	key := t.Name()
	const ttl = 1500 * time.Millisecond
	var fence int64
	err := c.Run(ctx, key, ttl, func(ctx context.Context, l *redislock.Lock) error {
		fence = l.Fence()
		from := rc.masterOf(t, key)
		to := rc.otherMaster(t, from)
		if err := rc.MigrateSlot(ctx, rc.slotOf(t, redislock.LockKey(key)), to); err != nil {
			t.Fatal(err)
		}
		if !holds(t, to.Server, key, l.Token()) {
			t.Fatalf("the lock is not on the slot's new master %s", to.Addr())
		}
		renewedAfter(t, l, validityFrom(time.Now(), ttl), 5*time.Second)
		if d := pttl(t, to.Server, key); d < ttl/2 {
			t.Fatalf("PTTL on the new master %v after a renewal of %v", d, ttl)
		}
		if _, err := other.Obtain(ctx, key, time.Second); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("Obtain after the migration = %v, want ErrNotObtained", err)
		}
		return ctx.Err()
	})
	if err != nil {
		t.Fatalf("Run across a slot migration = %v, want the lock kept", err)
	}
	l, err := other.Obtain(ctx, key, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if l.Fence() <= fence {
		t.Fatalf("fence %d after %d: the counter did not move with the slot", l.Fence(), fence)
	}
}

// While a lock's slot is being migrated (between MIGRATING and SETSLOT
// NODE) Refresh and TTL (one key) keep working, through ASK once the key
// has moved; Obtain finds the lock held; Release, whose script names keys
// that do not exist (the released-token list, the wake channel), gets
// TRYAGAIN from Redis and fails with that error, leaving the lock held
// (never deleted silently, never reported released). After the migration
// Release works.
func clusterMigrationWindow(t *testing.T, rc realCluster) {
	ctx := ctxT(t, 30*time.Second)
	c, other := newClient(t, rc.rdb), newClient(t, rc.rdb)
	key := t.Name()
	l, err := c.Obtain(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	from := rc.masterOf(t, key)
	to := rc.otherMaster(t, from)
	m, err := rc.BeginMigration(ctx, rc.slotOf(t, redislock.LockKey(key)), to)
	if err != nil {
		t.Fatal(err)
	}
	finished := false
	defer func() {
		if !finished { // leave the cluster usable for the next subtests
			_ = m.MoveKeys(context.Background())
			_ = m.Finish(context.Background())
		}
	}()
	check := func(stage string, on *redisproc.Node) {
		t.Helper()
		if err := l.Refresh(ctx, 10*time.Second); err != nil {
			t.Fatalf("%s: Refresh = %v", stage, err)
		}
		if d, err := l.TTL(ctx); err != nil || d <= 5*time.Second {
			t.Fatalf("%s: TTL = %v, %v", stage, d, err)
		}
		if _, err := other.Obtain(ctx, key, time.Second); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("%s: Obtain = %v, want ErrNotObtained", stage, err)
		}
		err := l.Release(ctx)
		if !redis.IsTryAgainError(err) {
			t.Fatalf("%s: Release = %v, want a TRYAGAIN error", stage, err)
		}
		if errors.Is(err, redislock.ErrNotHeld) || !holds(t, on.Server, key, l.Token()) {
			t.Fatalf("%s: a failed Release (%v) let go of the lock", stage, err)
		}
	}
	check("slot migrating, keys on the source", from)
	if err := m.MoveKeys(ctx); err != nil {
		t.Fatal(err)
	}
	check("slot migrating, keys on the target", to)
	if err := m.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	finished = true
	if err := l.Refresh(ctx, 10*time.Second); err != nil {
		t.Fatalf("Refresh after the migration = %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after the migration = %v", err)
	}
	if n := rc.rdb.Exists(ctx, redislock.LockKey(key)).Val(); n != 0 {
		t.Fatal("the lock is still held after Release")
	}
}

// A waiter subscribed with sharded pub/sub (SSUBSCRIBE on the master that
// owns the key) before the key's slot moves is still woken by the release
// on the new master: its deadline is shorter than its backoff and the
// holder's TTL, so only a wake-up grants it in time.
func clusterWaiterAcrossMigration(t *testing.T, rc realCluster) {
	ctx := ctxT(t, 30*time.Second)
	opts := []redislock.Option{redislock.WithShardedPubSub(true)}
	c, w := newClient(t, rc.rdb, opts...), newClient(t, rc.rdb, opts...)
	key := t.Name()
	h, err := c.Obtain(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		defer cancel()
		l, err := w.Obtain(wctx, key, time.Second, redislock.WithRetry(redislock.LinearBackoff(10*time.Second)))
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	eventually(t, 5*time.Second, "waiter subscribed", func() bool { _, ready := redislock.LocalWaiters(w, key); return ready })
	from := rc.masterOf(t, key)
	if err := rc.MigrateSlot(ctx, rc.slotOf(t, redislock.LockKey(key)), rc.otherMaster(t, from)); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter subscribed before the migration: %v (the release on the new master was not heard)", err)
	}
}

// A coordinated manual failover (CLUSTER FAILOVER on the replica: the
// master stops its clients until the replica has caught up) keeps a lock
// held by Run: the replica had it, renewals follow the new master (MOVED),
// and the lock stays exclusive.
func clusterManualFailover(t *testing.T, rc realCluster) {
	ctx := ctxT(t, 30*time.Second)
	c, other := newClient(t, rc.rdb), newClient(t, rc.rdb)
	key := t.Name()
	const ttl = 1500 * time.Millisecond
	var fence int64
	err := c.Run(ctx, key, ttl, func(ctx context.Context, l *redislock.Lock) error {
		fence = l.Fence()
		replica := rc.replicaOf(t, rc.masterOf(t, key))
		if err := rc.Failover(ctx, replica, redisproc.FailoverCoordinated); err != nil {
			t.Fatal(err)
		}
		if m := rc.masterOf(t, key); m != replica {
			t.Fatalf("after the failover the slot is on %s, want %s", m.Addr(), replica.Addr())
		}
		if !holds(t, replica.Server, key, l.Token()) {
			t.Fatal("the promoted replica does not hold the lock")
		}
		renewedAfter(t, l, validityFrom(time.Now(), ttl), 5*time.Second)
		if _, err := other.Obtain(ctx, key, time.Second); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("Obtain after the failover = %v, want ErrNotObtained", err)
		}
		return ctx.Err()
	})
	if err != nil {
		t.Fatalf("Run across a manual failover = %v, want the lock kept", err)
	}
	l, err := other.Obtain(ctx, key, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if l.Fence() <= fence {
		t.Fatalf("fence %d after %d", l.Fence(), fence)
	}
}

// A failover to a replica that never received the grant loses the lock:
// the replica is paused and cut off from its master (CLIENT KILL TYPE
// replica) before Run obtains the lock, the master is then killed, and the
// replica takes over (CLUSTER FAILOVER TAKEOVER) without the lock key. The
// holder's next renewal reaches the new master, finds no grant, and Run
// cancels fn's context with a cause matching ErrNotHeld before ValidUntil,
// then returns ErrLockLost. Another client can take the lock at once (the
// two hold it together until the holder's next renewal), with a higher
// fence: the fence counter was lost too, and the new one starts from the
// server's clock.
func clusterTakeoverWithoutGrant(t *testing.T, rc realCluster) {
	ctx := ctxT(t, 30*time.Second)
	c, other := newClient(t, rc.rdb), newClient(t, rc.rdb)
	key := t.Name()
	master := rc.masterOf(t, key)
	replica := rc.replicaOf(t, master)
	defer func() { // leave the cluster whole
		replica.Resume()
		if err := master.Revive(); err != nil {
			t.Error(err)
		} else if err := rc.WaitHealthy(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	replica.Pause()
	if _, err := master.Do(ctx, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
		t.Fatal(err)
	}
	err := c.Run(ctx, key, 3*time.Second, func(ctx context.Context, l *redislock.Lock) error {
		master.Kill()
		validUntil := l.ValidUntil() // no renewal can be confirmed from here on
		replica.Resume()
		if err := rc.Failover(ctx, replica, redisproc.FailoverTakeover); err != nil {
			t.Fatal(err)
		}
		if holds(t, replica.Server, key, l.Token()) {
			t.Fatal("the replica has the lock: the fault did not happen")
		}
		lostBefore(t, ctx, validUntil, redislock.ErrNotHeld)
		l2, err := other.Obtain(context.Background(), key, time.Second)
		if err != nil {
			t.Fatalf("Obtain after the loss = %v", err)
		}
		if l2.Fence() <= l.Fence() {
			t.Errorf("fence %d after %d: the new master's fences went backwards", l2.Fence(), l.Fence())
		}
		return l2.Release(context.Background())
	})
	if !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("Run = %v, want ErrLockLost", err)
	}
}
