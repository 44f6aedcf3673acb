package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redisproc"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
)

// Locks held on every master are renewed by one renewer, the calls of one
// node (one batch_refresh.lua per slot) pipelined; a lock deleted behind
// its holder's back is reported to that holder alone.
func clusterKeptAcrossSlots(t *testing.T, rc realCluster) {
	ctx := testkit.Context(t)
	rdb := rc.Client(nil)
	calls := &batchCalls{}
	rdb.AddHook(calls)
	rec := newRenewLog()
	c := newClient(t, rdb, redislock.WithObserver(rec))
	const n = 60
	const ttl = 1500 * time.Millisecond
	keys, held := holdMany(t, ctx, c, t.Name(), n, ttl)
	for _, h := range held {
		defer h.Release(ctx)
	}
	require.Eventually(t, func() bool { return rec.renewedAll(keys) }, 10*time.Second, 5*time.Millisecond, "every lock renewed")
	p, k := calls.pipelines.Load(), calls.calls.Load()
	assert.False(t, p == 0 || p >= k, "%d pipelines for %d batch_refresh calls: not pipelined", p, k)
	victim := held[7]
	watch := watchLoss(victim.Context(), victim.Lock())
	until := victim.Lock().ValidUntil()
	require.NoError(t, rdb.Del(ctx, redislock.LockKey(keys[7])).Err())
	watch.before(t, until, redislock.ErrNotHeld)
	for i, h := range held {
		if i != 7 {
			renewedAfter(t, h.Lock(), until, 5*time.Second)
			require.NoError(t, h.Err(), "%s", keys[i])
		}
	}
}

// The master of a held, replicated lock is killed and its replica takes
// over: the renewals, refused by the dead master, make the client reload
// its slot map, and go on on the new master, where the lock is kept
// (go-redis alone would go on asking the dead master until its slot map is
// 10 s old, and the lease would run out).
func clusterKilledMasterFollowed(t *testing.T, rc realCluster) {
	ctx := testkit.Context(t)
	rdb := rc.Client(nil)
	c := newClient(t, rdb, redislock.WithObserver(nodeLog{t}))
	key := t.Name()
	master := rc.masterOf(t, key)
	replica := rc.replicaOf(t, master)
	defer func() { // leave the cluster whole
		if assert.NoError(t, master.Revive()) {
			assert.NoError(t, rc.WaitHealthy(context.Background()))
		}
	}()
	const ttl = 4 * time.Second
	err := c.Run(ctx, key, ttl, func(ctx context.Context, l *redislock.Lock) error {
		acked, err := master.Do(ctx, "WAIT", 1, 2000)
		require.False(t, err != nil || acked != int64(1), "WAIT = %v, %v", acked, err)
		master.Kill()
		killed := time.Now()
		require.NoError(t, rc.Failover(ctx, replica, redisproc.FailoverTakeover))
		renewedAfter(t, l, validityFrom(killed, ttl), 10*time.Second)
		require.True(t, holds(t, replica.Server, key, l.Token()), "the new master does not hold the lock")
		return context.Cause(ctx)
	}, redislock.WithRefreshInterval(ttl/4))
	require.NoError(t, err, "Run across a killed master, want the lock kept")
}

// nodeLog is an Observer that logs the failed node calls (the renewals
// during a failover).
type nodeLog struct{ t *testing.T }

func (n nodeLog) NodeFailed(_ context.Context, e observe.NodeEvent) {
	n.t.Logf("node failed %s: %v (%T)", e.Op, e.Err, errors.Unwrap(e.Err))
}

// WithReplicas on Cluster: the WAIT runs on the master of the key's slot,
// so the grant is on that master's replica when Obtain returns; Run's
// batched renewals wait for it too.
func clusterReplicas(t *testing.T, rc realCluster) {
	ctx := testkit.Context(t)
	c := newClient(t, rc.rdb, redislock.WithReplicas(1, 2*time.Second))
	for _, key := range rc.keysOnMasters(t, t.Name(), 3) {
		replica := rc.replicaOf(t, rc.masterOf(t, key))
		err := c.Run(ctx, key, time.Second, func(ctx context.Context, l *redislock.Lock) error {
			require.True(t, replicaHolds(t, replica, key, l.Token()), "%s: Obtain returned before the replica had the grant", key)
			renewedAfter(t, l, l.ValidUntil(), 5*time.Second)
			return context.Cause(ctx)
		})
		require.NoError(t, err, "%s: Run", key)
		// Each master has one replica: two never acknowledge.
		_, err = c.Obtain(ctx, key, time.Second, redislock.WithReplicas(2, 20*time.Millisecond))
		require.ErrorIs(t, err, redislock.ErrNotReplicated, "%s: Obtain wanting 2 replicas, want ErrNotReplicated", key)
		require.False(t, held(ctx, rc.rdb, redislock.LockKey(key)), "%s: the unacknowledged grant was not released", key)
	}
}

// replicaHolds reports whether cluster replica n itself holds key's lock
// with token (read with READONLY, which a cluster replica needs to answer
// a read for its master's slots).
func replicaHolds(t *testing.T, n *redisproc.Node, key, token string) bool {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1,
		OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }})
	defer rdb.Close()
	v, err := rdb.Get(context.Background(), redislock.LockKey(key)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false
	case err != nil:
		require.Fail(t, fmt.Sprintf("GET on %s: %v", n.Addr(), err))
	}
	return strings.HasPrefix(v, token+":")
}

// Under load, calls through a ClusterClient are auto-pipelined too (one
// pipeline per node), and every grant, fence and release is still right.
func clusterAutoPipeline(t *testing.T, rc realCluster) {
	ctx := testkit.Context(t)
	c := newClient(t, rc.Client(nil))
	ObtainReleaseLoop(ctx, t, c, t.Name(), 64, 30)
	require.True(t, redislock.Pipelined(c), "64 callers did not set up auto-pipelining")
}

// Two locks renewed with WithReplicas share calls on their master; one's
// slot then moves to another master. Each is renewed, and acknowledged,
// on the master that serves it now: the renewal waits on a connection per
// current master, not on the one the locks shared.
func clusterReplicasAcrossMigration(t *testing.T, rc realCluster) {
	ctx := testkit.Context(t)
	c := newClient(t, rc.rdb, redislock.WithReplicas(1, 2*time.Second))
	moved := t.Name() + "-moved"
	master := rc.masterOf(t, moved)
	stays := ""
	for i := 0; stays == ""; i++ {
		if k := fmt.Sprintf("%s-stays-%d", t.Name(), i); rc.masterOf(t, k) == master && rc.slotOf(t, redislock.LockKey(k)) != rc.slotOf(t, redislock.LockKey(moved)) {
			stays = k
		}
	}
	const ttl = 1500 * time.Millisecond
	var held []*lease.Held
	for _, key := range []string{moved, stays} {
		l, err := c.Obtain(ctx, key, ttl)
		require.NoError(t, err)
		h, err := lease.Hold(ctx, l, ttl)
		require.NoError(t, err)
		defer h.Release(ctx)
		held = append(held, h)
	}
	to := rc.otherMaster(t, master)
	require.NoError(t, rc.MigrateSlot(ctx, rc.slotOf(t, redislock.LockKey(moved)), to))
	since := validityFrom(time.Now(), ttl)
	for _, h := range held {
		renewedAfter(t, h.Lock(), since, 5*time.Second)
		renewedAfter(t, h.Lock(), h.Lock().ValidUntil(), 5*time.Second)
		require.NoError(t, h.Err(), "%s", h.Lock().Key())
	}
}

// WithReplicas across a coordinated manual failover (CLUSTER FAILOVER on
// the replica): the old master turns into the new one's replica as part
// of the failover and resyncs from it at once, so renewals are
// acknowledged again within a short lease and Run keeps the lock; the old
// master, now the replica, has the renewed grant.
func clusterReplicasManualFailover(t *testing.T, rc realCluster) {
	ctx := testkit.Context(t)
	c := newClient(t, rc.rdb, redislock.WithReplicas(1, time.Second))
	key := t.Name()
	const ttl = 1500 * time.Millisecond
	err := c.Run(ctx, key, ttl, func(ctx context.Context, l *redislock.Lock) error {
		old := rc.masterOf(t, key)
		replica := rc.replicaOf(t, old)
		require.NoError(t, rc.Failover(ctx, replica, redisproc.FailoverCoordinated))
		m := rc.masterOf(t, key)
		require.Same(t, replica, m, "after the failover the slot is on %s, want %s", m.Addr(), replica.Addr())
		renewedAfter(t, l, validityFrom(time.Now(), ttl), 5*time.Second)
		require.True(t, replicaHolds(t, old, key, l.Token()), "a renewal acknowledged before the old master, now a replica, had the grant")
		return context.Cause(ctx)
	})
	require.NoError(t, err, "Run with WithReplicas across a manual failover, want the lock kept")
}
