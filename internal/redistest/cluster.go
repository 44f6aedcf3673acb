package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock/internal/redisproc"
	"github.com/stretchr/testify/require"
)

// Cluster is a Redis Cluster owned by a test (see redisproc.Cluster): its
// nodes are killed when the test ends, and their logs' tails logged first
// if the test failed.
type Cluster struct {
	*redisproc.Cluster
	tb testing.TB
}

// StartCluster starts a Redis Cluster of cfg (the zero value: 3 masters
// with a replica each) and waits until it is healthy. Without redis-server
// or redis-cli the test is skipped (failed under RequireEnv).
func StartCluster(tb testing.TB, cfg redisproc.ClusterConfig) *Cluster {
	tb.Helper()
	cfg.Bin, cfg.CLI = Binary(tb), CLI(tb)
	c, err := redisproc.StartCluster(context.Background(), cfg)
	require.NoError(tb, err)
	var srvs []*redisproc.Server
	for _, n := range c.Nodes() {
		srvs = append(srvs, n.Server)
	}
	closeAtEnd(tb, srvs...)
	return &Cluster{Cluster: c, tb: tb}
}

// Client returns a cluster client, closed when the test ends. Options can
// be adjusted with fn (may be nil); Addrs is set to every node.
func (c *Cluster) Client(fn func(*redis.ClusterOptions)) *redis.ClusterClient {
	cc := c.Cluster.Client(fn)
	c.tb.Cleanup(func() { _ = cc.Close() })
	return cc
}
