package redisproc

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The cluster is formed, a slot moves with its keys and their TTLs, and a
// coordinated failover swaps a master and its replica without losing the
// key; a cluster client follows both.
func TestCluster(t *testing.T) {
	t.Parallel()
	skipShort(t)
	ctx, c, masters := startCluster(t, ClusterConfig{}, 1)
	cc := c.Client(nil)
	defer cc.Close()
	const key = "redisproc-key"
	if err := cc.Set(ctx, key, "v", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	slot, err := c.Slot(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	from, err := c.MasterOf(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	to := masters[0]
	if to == from {
		to = masters[1]
	}
	if err := c.MigrateSlot(ctx, slot, to); err != nil {
		t.Fatal(err)
	}
	if owner, err := c.MasterOf(ctx, slot); err != nil || owner != to {
		t.Fatalf("slot %d on %v after migration to %s (%v)", slot, owner, to.Addr(), err)
	}
	if ttl, err := to.Do(ctx, "PTTL", key); err != nil || ttl.(int64) < int64(time.Hour/time.Millisecond)-60000 {
		t.Fatalf("PTTL on the new owner = %v, %v: the key or its TTL did not move", ttl, err)
	}

	rs, err := c.ReplicasOf(ctx, to)
	if err != nil || len(rs) != 1 {
		t.Fatalf("replicas of %s = %v, %v", to.Addr(), rs, err)
	}
	if err := c.Failover(ctx, rs[0], FailoverCoordinated); err != nil {
		t.Fatal(err)
	}
	if owner, err := c.MasterOf(ctx, slot); err != nil || owner != rs[0] {
		t.Fatalf("slot %d on %v after failover to %s (%v)", slot, owner, rs[0].Addr(), err)
	}
	if v, err := cc.Get(ctx, key).Result(); err != nil || v != "v" {
		t.Fatalf("GET through the cluster client after migration and failover = %q, %v", v, err)
	}
}

// NoReplicas forms a cluster of masters alone, which serves every slot.
func TestClusterNoReplicas(t *testing.T) {
	t.Parallel()
	skipShort(t)
	ctx, c, _ := startCluster(t, ClusterConfig{Replicas: NoReplicas}, 0)
	cc := c.Client(nil)
	defer cc.Close()
	for i := range 30 { // keys on all three masters' slots
		if err := cc.Set(ctx, fmt.Sprint("k", i), "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	masters, err := c.Masters(ctx)
	if err != nil || len(masters) != 3 {
		t.Fatalf("masters = %v, %v", masters, err)
	}
	for _, m := range masters {
		if rs, err := c.ReplicasOf(ctx, m); err != nil || len(rs) != replicas {
			t.Fatalf("replicas of %s = %v, %v; want %d", m.Addr(), rs, err, replicas)
		}
	}
	return ctx, c, masters
}
