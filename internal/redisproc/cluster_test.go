package redisproc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/testkit"
)

// The cluster is formed, a slot moves with its keys and their TTLs, and a
// coordinated failover swaps a master and its replica without losing the
// key; a cluster client follows both.
func TestCluster(t *testing.T) {
	t.Parallel()
	testkit.SkipShort(t)
	ctx, c, masters := startCluster(t, ClusterConfig{}, 1)
	cc := c.Client(nil)
	defer cc.Close()
	const key = "redisproc-key"
	require.NoError(t, cc.Set(ctx, key, "v", time.Hour).Err())
	slot, err := c.Slot(ctx, key)
	require.NoError(t, err)
	from, err := c.MasterOf(ctx, slot)
	require.NoError(t, err)
	to := masters[0]
	if to == from {
		to = masters[1]
	}
	require.NoError(t, c.MigrateSlot(ctx, slot, to))
	owner, err := c.MasterOf(ctx, slot)
	require.NoError(t, err)
	require.Same(t, to, owner, "slot %d after migration to %s", slot, to.Addr())
	ttl, err := to.Do(ctx, "PTTL", key)
	require.NoError(t, err)
	require.GreaterOrEqual(t, ttl, int64(time.Hour/time.Millisecond)-60000, "PTTL on the new owner: the key or its TTL did not move")

	rs, err := c.ReplicasOf(ctx, to)
	require.NoError(t, err)
	require.Len(t, rs, 1, "replicas of %s", to.Addr())
	require.NoError(t, c.Failover(ctx, rs[0], FailoverCoordinated))
	owner, err = c.MasterOf(ctx, slot)
	require.NoError(t, err)
	require.Same(t, rs[0], owner, "slot %d after failover to %s", slot, rs[0].Addr())
	v, err := cc.Get(ctx, key).Result()
	require.NoError(t, err, "GET through the cluster client after migration and failover")
	require.Equal(t, "v", v, "GET through the cluster client after migration and failover")
}

// NoReplicas forms a cluster of masters alone, which serves every slot.
func TestClusterNoReplicas(t *testing.T) {
	t.Parallel()
	testkit.SkipShort(t)
	ctx, c, _ := startCluster(t, ClusterConfig{Replicas: NoReplicas}, 0)
	cc := c.Client(nil)
	defer cc.Close()
	for i := range 30 { // keys on all three masters' slots
		require.NoError(t, cc.Set(ctx, fmt.Sprint("k", i), "v", time.Minute).Err())
	}
}

// startCluster starts a cluster of cfg for the test and checks that it has
// 3 masters with replicas replicas each.
func startCluster(t *testing.T, cfg ClusterConfig, replicas int) (context.Context, *Cluster, []*Node) {
	t.Helper()
	need(t, "redis-server", "redis-cli")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	c, err := StartCluster(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	masters, err := c.Masters(ctx)
	require.NoError(t, err)
	require.Len(t, masters, 3, "masters")
	for _, m := range masters {
		rs, err := c.ReplicasOf(ctx, m)
		require.NoError(t, err)
		require.Len(t, rs, replicas, "replicas of %s", m.Addr())
	}
	return ctx, c, masters
}
