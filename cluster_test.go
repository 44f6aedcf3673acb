package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/lease/leasetest"
	"github.com/stretchr/testify/require"
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
	ctx := testkit.Context(t)
	c, other := newClient(t, rc.rdb), newClient(t, rc.rdb)
	for _, key := range rc.keysOnMasters(t, t.Name(), 3) {
		l, err := c.Obtain(ctx, key, 5*time.Second)
		require.NoError(t, err)
		m := rc.masterOf(t, key)
		require.True(t, holds(t, m.Server, key, l.Token()), "%s: lock not on its slot's master %s", key, m.Addr())
		if _, err := other.Obtain(ctx, key, time.Second); !errors.Is(err, redislock.ErrNotObtained) {
			require.Fail(t, fmt.Sprintf("%s: second Obtain = %v, want ErrNotObtained", key, err))
		}
		require.NoError(t, l.Refresh(ctx, 10*time.Second))
		d, err := l.TTL(ctx)
		require.NoError(t, err, "%s: TTL after Refresh(10s) = %v", key, d)
		require.Greater(t, d, 5*time.Second, "%s: TTL after Refresh(10s), %v", key, err)
		info, err := other.Inspect(ctx, key)
		require.NoError(t, err, "%s: Inspect = %+v", key, info)
		require.True(t, info.Held, "%s: Inspect = %+v, %v", key, info, err)
		require.Equal(t, l.Fence(), info.Fence, "%s: Inspect = %+v, %v", key, info, err)
		require.NoError(t, l.Release(ctx))
		require.ErrorIs(t, l.Release(ctx), redislock.ErrNotHeld, "%s: second Release, want ErrNotHeld", key)
		l2, err := other.Obtain(ctx, key, time.Second)
		require.NoError(t, err)
		require.Greater(t, l2.Fence(), l.Fence(), "%s: fence after %d", key, l.Fence())
		require.NoError(t, l2.Release(ctx))
	}
}

// Keys with a common part in braces ("{order:7}:a", "{order:7}:b") do not
// share a slot: the lock keys wrap the whole key in a hash tag of their
// own, and ObtainMulti takes them one slot at a time, all or nothing.
func clusterMultiUserTags(t *testing.T, rc realCluster) {
	a, b := "{order:7}:a", "{order:7}:b"
	ctx := testkit.Context(t)
	m, err := newClient(t, rc.rdb).ObtainMulti(ctx, []string{a, b}, 5*time.Second)
	require.NoError(t, err)
	defer m.Release(context.Background())
	// As ObtainMulti's doc says: the braces of a key do not pick its slot.
	sa, sb := rc.slotOf(t, redislock.LockKey(a)), rc.slotOf(t, redislock.LockKey(b))
	require.NotEqual(t, sb, sa, "lock keys %q and %q share slot", redislock.LockKey(a), redislock.LockKey(b))
	for _, k := range []string{a, b} {
		require.Equal(t, int64(1), rc.rdb.Exists(ctx, redislock.LockKey(k)).Val(), "%s not held", k)
	}
}

// Keys on three masters are taken all or nothing, one slot at a time:
// a competing set that overlaps gets none of its keys.
func clusterMultiAcrossSlots(t *testing.T, rc realCluster) {
	ctx := testkit.Context(t)
	c, other := newClient(t, rc.rdb), newClient(t, rc.rdb)
	keys := rc.keysOnMasters(t, t.Name(), 3)
	m, err := c.ObtainMulti(ctx, keys, 5*time.Second)
	require.NoError(t, err)
	for _, k := range keys {
		require.True(t, holds(t, rc.masterOf(t, k).Server, k, m.Token()), "%s not held on its master (fence %d)", k, m.Fence(k))
		require.Greater(t, m.Fence(k), int64(0), "%s not held on its master (fence)", k)
	}
	free := t.Name() + "-free"
	if _, err := other.ObtainMulti(ctx, []string{free, keys[1]}, time.Second); !errors.Is(err, redislock.ErrNotObtained) {
		require.Fail(t, fmt.Sprintf("overlapping ObtainMulti = %v, want ErrNotObtained", err))
	}
	require.False(t, held(ctx, rc.rdb, redislock.LockKey(free)), "the failed overlapping set left its free key held")
	require.NoError(t, m.Refresh(ctx, 10*time.Second))
	if d, err := m.TTL(ctx); err != nil || d <= 5*time.Second {
		require.Fail(t, fmt.Sprintf("TTL after Refresh(10s) = %v, %v", d, err))
	}
	require.NoError(t, m.Release(ctx))
	for _, k := range keys {
		require.False(t, held(ctx, rc.rdb, redislock.LockKey(k)), "%s held after Release", k)
	}
	// A waiter for the set is woken by the release of the key it found held.
	h, err := c.Obtain(ctx, keys[2], time.Minute)
	require.NoError(t, err)
	released := make(chan error, 1)
	go func() {
		require.Eventually(t, func() bool { _, ready := redislock.LocalWaiters(other, keys[2]); return ready }, 5*time.Second, 5*time.Millisecond, "set waiter subscribed")
		released <- h.Release(context.Background())
	}()
	wctx, cancel := context.WithTimeout(ctx, 4*time.Second) // shorter than the backoff: only a wake-up grants it
	defer cancel()
	m2, err := other.ObtainMulti(wctx, keys, time.Second, redislock.WithRetry(redislock.LinearBackoff(5*time.Second)))
	require.NoError(t, <-released)
	require.NoError(t, err, "set waiter (the release was not heard)")
	require.NoError(t, m2.Release(ctx))
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
		require.True(t, slices.Equal(order, []int{0, 1, 2, 3}), "%s: granted in order %v, want arrival order", key, order)
	}
}

// Fences increase across clients on every master, and FencedSet on the
// cluster refuses a stale fence.
func clusterFences(t *testing.T, rc realCluster) {
	ctx := testkit.Context(t)
	clients := []*redislock.Client{newClient(t, rc.rdb), newClient(t, rc.rdb)}
	for _, key := range rc.keysOnMasters(t, t.Name(), 3) {
		var last int64
		for i := range 6 {
			l, err := clients[i%2].Obtain(ctx, key, 5*time.Second)
			require.NoError(t, err)
			require.Greater(t, l.Fence(), last, "%s: fence after %d", key, last)
			last = l.Fence()
			require.NoError(t, redislock.FencedSet(ctx, rc.rdb, key+":resource", fmt.Sprint(i), l.Fence(), time.Minute))
			require.NoError(t, l.Release(ctx))
		}
		require.ErrorIs(t, redislock.FencedSet(ctx, rc.rdb, key+":resource", "stale", last-1, time.Minute), redislock.ErrStaleFence, "%s: stale FencedSet, want ErrStaleFence", key)
	}
}

// Run renews a lock on each master past its TTL and releases it.
func clusterRun(t *testing.T, rc realCluster) {
	ctx := testkit.Context(t)
	c := newClient(t, rc.rdb)
	for _, key := range rc.keysOnMasters(t, t.Name(), 3) {
		err := c.Run(ctx, key, 600*time.Millisecond, func(ctx context.Context, l *redislock.Lock) error {
			first := l.ValidUntil()
			renewedAfter(t, l, first, 5*time.Second)
			renewedAfter(t, l, l.ValidUntil(), 5*time.Second)
			return ctx.Err()
		})
		require.NoError(t, err, "%s: Run", key)
		require.False(t, held(ctx, rc.rdb, redislock.LockKey(key)), "%s: Run did not release", key)
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
	ctx := testkit.Context(t)
	var keys, tokens []string
	for i := range 100 {
		k, tok := fmt.Sprintf("{%s}:%d", t.Name(), i), fmt.Sprintf("t%d", i)
		require.NoError(t, rc.rdb.Set(ctx, k, tok+":1", time.Second).Err())
		keys, tokens = append(keys, k), append(tokens, tok)
	}
	got, err := script.BatchRefresh(ctx, rc.rdb, keys, tokens, 60000, nil)
	require.NoError(t, err)
	for i, s := range got {
		require.Equal(t, script.BatchRenewed, s, "key %d", i)
	}
	two := rc.keysOnMasters(t, t.Name()+"-x", 2)
	_, err = script.BatchRefresh(ctx, rc.rdb, []string{redislock.LockKey(two[0]), redislock.LockKey(two[1])}, []string{"a", "b"}, 1000, nil)
	require.Error(t, err, "keys of two slots, want CROSSSLOT")
	require.Contains(t, err.Error(), "CROSSSLOT", "keys of two slots: %v, want CROSSSLOT", err)
}
