package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease/leasetest"
)

// testCluster runs every operation through a redis.ClusterClient on a real
// Redis Cluster of 3 masters with a replica each, then the faults of
// cluster_faults_test.go (slot migration, failovers) on the same cluster.
// One cluster serves all subtests; each uses keys of its own.
func testCluster(t *testing.T) {
	rc := startRealCluster(t)
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, rc realCluster)
	}{
		{"Lock", clusterLock},
		{"MultiUserTags", clusterMultiUserTags},
		{"MultiAcrossSlots", clusterMultiAcrossSlots},
		{"Notified", clusterNotified},
		{"Fair", clusterFair},
		{"Fences", clusterFences},
		{"Run", clusterRun},
		{"LeaseContract", clusterLeaseContract},
		{"BatchRefreshScript", clusterBatchRefresh},
		{"KeptAcrossSlots", clusterKeptAcrossSlots},
		{"Replicas", clusterReplicas},
		{"AutoPipeline", clusterAutoPipeline},
		// Faults, last: they move slots and masters.
		{"SlotMigration", clusterSlotMigration},
		{"ReplicasAcrossMigration", clusterReplicasAcrossMigration},
		{"MigrationWindow", clusterMigrationWindow},
		{"WaiterAcrossMigration", clusterWaiterAcrossMigration},
		{"ManualFailover", clusterManualFailover},
		{"ReplicasManualFailover", clusterReplicasManualFailover},
		{"TakeoverWithoutGrant", clusterTakeoverWithoutGrant},
		{"KilledMasterFollowed", clusterKilledMasterFollowed},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, rc) })
	}
}

// A lock on each master: held there and nowhere else, exclusive, renewable,
// inspectable, released once.
func clusterLock(t *testing.T, rc realCluster) {
	ctx := ctxT(t, 20*time.Second)
	c, other := newClient(t, rc.rdb), newClient(t, rc.rdb)
	for _, key := range rc.keysOnMasters(t, t.Name(), 3) {
		l, err := c.Obtain(ctx, key, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m := rc.masterOf(t, key); !holds(t, m.Server, key, l.Token()) {
			t.Fatalf("%s: lock not on its slot's master %s", key, m.Addr())
		}
		if _, err := other.Obtain(ctx, key, time.Second); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("%s: second Obtain = %v, want ErrNotObtained", key, err)
		}
		if err := l.Refresh(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if d, err := l.TTL(ctx); err != nil || d <= 5*time.Second {
			t.Fatalf("%s: TTL after Refresh(10s) = %v, %v", key, d, err)
		}
		info, err := other.Inspect(ctx, key)
		if err != nil || !info.Held || info.Fence != l.Fence() {
			t.Fatalf("%s: Inspect = %+v, %v", key, info, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("%s: second Release = %v, want ErrNotHeld", key, err)
		}
		l2, err := other.Obtain(ctx, key, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if l2.Fence() <= l.Fence() {
			t.Fatalf("%s: fence %d after %d", key, l2.Fence(), l.Fence())
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Keys with a common part in braces ("{order:7}:a", "{order:7}:b") do not
// share a slot: the lock keys wrap the whole key in a hash tag of their
// own, and ObtainMulti takes them one slot at a time, all or nothing.
func clusterMultiUserTags(t *testing.T, rc realCluster) {
	a, b := "{order:7}:a", "{order:7}:b"
	ctx := ctxT(t, 5*time.Second)
	m, err := newClient(t, rc.rdb).ObtainMulti(ctx, []string{a, b}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release(context.Background())
	// As ObtainMulti's doc says: the braces of a key do not pick its slot.
	if sa, sb := rc.slotOf(t, redislock.LockKey(a)), rc.slotOf(t, redislock.LockKey(b)); sa == sb {
		t.Fatalf("lock keys %q and %q share slot %d", redislock.LockKey(a), redislock.LockKey(b), sa)
	}
	for _, k := range []string{a, b} {
		if rc.rdb.Exists(ctx, redislock.LockKey(k)).Val() != 1 {
			t.Fatalf("%s not held", k)
		}
	}
}

// Keys on three masters are taken all or nothing, one slot at a time:
// a competing set that overlaps gets none of its keys.
func clusterMultiAcrossSlots(t *testing.T, rc realCluster) {
	ctx := ctxT(t, 20*time.Second)
	c, other := newClient(t, rc.rdb), newClient(t, rc.rdb)
	keys := rc.keysOnMasters(t, t.Name(), 3)
	m, err := c.ObtainMulti(ctx, keys, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !holds(t, rc.masterOf(t, k).Server, k, m.Token()) || m.Fence(k) <= 0 {
			t.Fatalf("%s not held on its master (fence %d)", k, m.Fence(k))
		}
	}
	free := t.Name() + "-free"
	if _, err := other.ObtainMulti(ctx, []string{free, keys[1]}, time.Second); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("overlapping ObtainMulti = %v, want ErrNotObtained", err)
	}
	if held(ctx, rc.rdb, redislock.LockKey(free)) {
		t.Fatal("the failed overlapping set left its free key held")
	}
	if err := m.Refresh(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if d, err := m.TTL(ctx); err != nil || d <= 5*time.Second {
		t.Fatalf("TTL after Refresh(10s) = %v, %v", d, err)
	}
	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if held(ctx, rc.rdb, redislock.LockKey(k)) {
			t.Fatalf("%s held after Release", k)
		}
	}
	// A waiter for the set is woken by the release of the key it found held.
	h, err := c.Obtain(ctx, keys[2], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() {
		eventually(t, 5*time.Second, "set waiter subscribed", func() bool { _, ready := redislock.LocalWaiters(other, keys[2]); return ready })
		released <- h.Release(context.Background())
	}()
	wctx, cancel := context.WithTimeout(ctx, 4*time.Second) // shorter than the backoff: only a wake-up grants it
	defer cancel()
	m2, err := other.ObtainMulti(wctx, keys, time.Second, redislock.WithRetry(redislock.LinearBackoff(5*time.Second)))
	if rerr := <-released; rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatalf("set waiter: %v (the release was not heard)", err)
	}
	if err := m2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Notified waiting with PUBLISH (broadcast to every node) and with sharded
// pub/sub (one subscription per master that owns a waited-for key).
func clusterNotified(t *testing.T, rc realCluster) {
	for _, sharded := range []bool{false, true} {
		t.Run(fmt.Sprintf("sharded=%v", sharded), func(t *testing.T) {
			checkNoLostWakeup(t, rc.rdb, 10, redislock.WithShardedPubSub(sharded))
		})
	}
}

// Fair locks grant waiters, each on its own Client, in arrival order; the
// queue lives in the lock's slot.
func clusterFair(t *testing.T, rc realCluster) {
	for _, key := range rc.keysOnMasters(t, t.Name(), 2) {
		order := fairOrder(t, rc.rdb, key, 4, redislock.WithFair(true))
		if !slices.Equal(order, []int{0, 1, 2, 3}) {
			t.Fatalf("%s: granted in order %v, want arrival order", key, order)
		}
	}
}

// Fences increase across clients on every master, and FencedSet on the
// cluster refuses a stale fence.
func clusterFences(t *testing.T, rc realCluster) {
	ctx := ctxT(t, 20*time.Second)
	clients := []*redislock.Client{newClient(t, rc.rdb), newClient(t, rc.rdb)}
	for _, key := range rc.keysOnMasters(t, t.Name(), 3) {
		var last int64
		for i := range 6 {
			l, err := clients[i%2].Obtain(ctx, key, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if l.Fence() <= last {
				t.Fatalf("%s: fence %d after %d", key, l.Fence(), last)
			}
			last = l.Fence()
			if err := redislock.FencedSet(ctx, rc.rdb, key+":resource", fmt.Sprint(i), l.Fence(), time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := redislock.FencedSet(ctx, rc.rdb, key+":resource", "stale", last-1, time.Minute); !errors.Is(err, redislock.ErrStaleFence) {
			t.Fatalf("%s: stale FencedSet = %v, want ErrStaleFence", key, err)
		}
	}
}

// Run renews a lock on each master past its TTL and releases it.
func clusterRun(t *testing.T, rc realCluster) {
	ctx := ctxT(t, 20*time.Second)
	c := newClient(t, rc.rdb)
	for _, key := range rc.keysOnMasters(t, t.Name(), 3) {
		err := c.Run(ctx, key, 600*time.Millisecond, func(ctx context.Context, l *redislock.Lock) error {
			first := l.ValidUntil()
			renewedAfter(t, l, first, 5*time.Second)
			renewedAfter(t, l, l.ValidUntil(), 5*time.Second)
			return ctx.Err()
		})
		if err != nil {
			t.Fatalf("%s: Run = %v", key, err)
		}
		if held(ctx, rc.rdb, redislock.LockKey(key)) {
			t.Fatalf("%s: Run did not release", key)
		}
	}
}

// The Client on the cluster passes the lease contract's suite.
func clusterLeaseContract(t *testing.T, rc realCluster) {
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		c := newClient(t, rc.rdb)
		return leasetest.Env{
			Locker: c.Locker(),
			Store:  c.Store(),
			Other:  newClient(t, rc.rdb).Locker(),
			Break: func(key string) {
				if err := rc.rdb.Del(context.Background(), redislock.LockKey(key)).Err(); err != nil {
					panic(err)
				}
			},
		}
	})
}

// batch_refresh.lua renews the locks of one slot in one call through the
// cluster client (routed by the first key), and Redis refuses keys of two
// slots (CROSSSLOT): the batched renewal groups keys by slot.
func clusterBatchRefresh(t *testing.T, rc realCluster) {
	ctx := ctxT(t, 10*time.Second)
	var keys, tokens []string
	for i := range 100 {
		k, tok := fmt.Sprintf("{%s}:%d", t.Name(), i), fmt.Sprintf("t%d", i)
		if err := rc.rdb.Set(ctx, k, tok+":1", time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		keys, tokens = append(keys, k), append(tokens, tok)
	}
	got, err := script.BatchRefresh(ctx, rc.rdb, keys, tokens, 60000, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range got {
		if s != script.BatchRenewed {
			t.Fatalf("key %d: %v", i, s)
		}
	}
	two := rc.keysOnMasters(t, t.Name()+"-x", 2)
	_, err = script.BatchRefresh(ctx, rc.rdb, []string{redislock.LockKey(two[0]), redislock.LockKey(two[1])}, []string{"a", "b"}, 1000, nil)
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("keys of two slots: %v, want CROSSSLOT", err)
	}
}
