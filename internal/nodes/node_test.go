package nodes_test

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/redistest"
)

// A node knows its client's kind and whether it applies deadlines; IsNil
// sees a nil client inside an interface.
func TestNewKinds(t *testing.T) {
	t.Parallel()
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	timed := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	for _, c := range []struct {
		rdb       redis.UniversalClient
		kind      nodes.Kind
		deadlines bool
	}{
		{plain, nodes.Standalone, false},
		{timed, nodes.Standalone, true},
		{cluster, nodes.Cluster, false},
		{ring, nodes.Ring, false},
	} {
		n := nodes.New(0, c.rdb, nil)
		assert.False(t, n.Kind != c.kind || n.Deadlines != c.deadlines, "%T: kind %d deadlines %v, want %d %v", c.rdb, n.Kind, n.Deadlines, c.kind, c.deadlines)
		if own := c.kind == nodes.Standalone || c.kind == nodes.Cluster; n.OwnConns() != own {
			t.Errorf("%T: OwnConns %v, want %v", c.rdb, n.OwnConns(), own)
		}
		n.Close()
		_ = c.rdb.Close()
	}
	var nilClient *redis.Client
	require.True(t, nodes.IsNil(nil), "IsNil: wrong for nil, a nil *redis.Client in an interface, or a client")
	require.True(t, nodes.IsNil(redis.UniversalClient(nilClient)), "IsNil: wrong for nil, a nil *redis.Client in an interface, or a client")
	require.False(t, nodes.IsNil(plain), "IsNil: wrong for nil, a nil *redis.Client in an interface, or a client")
}

// OnConn runs a script and its WAIT on one connection of the key's
// server; OnConns, on a single server, runs once for every key; a Ring
// has no connection of its own to give (ErrNoConn).
func TestOnConnWait(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	n := nodes.New(0, rdb, nil)
	defer n.Close()
	ctx := context.Background()
	err := n.OnConn(ctx, "k", func(conn *redis.Conn) error {
		if err := conn.Set(ctx, "k", "v", 0).Err(); err != nil {
			return err
		}
		acked, err := nodes.Wait(ctx, conn, 0, 0)
		assert.False(t, err == nil && acked != 0, "WAIT on a server without replicas: %d acknowledged", acked)
		return err
	})
	require.NoError(t, err)
	var calls [][]int
	errs := n.OnConns(ctx, []string{"a", "b", "c"}, func(conn *redis.Conn, is []int) error {
		calls = append(calls, is)
		return redis.Nil
	})
	require.Len(t, calls, 1, "OnConns on one server ran for %v, want once for [0 1 2]", calls)
	require.True(t, slices.Equal(calls[0], []int{0, 1, 2}), "OnConns on one server ran for %v, want once for [0 1 2]", calls)
	for i, err := range errs {
		require.False(t, err != redis.Nil, "key %d: %v, want its server's error", i, err)
	}
	if _, ok := n.MasterAddr(ctx, "k"); ok {
		t.Fatal("MasterAddr answered for a client that is not a Cluster")
	}

	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr()}})
	defer ring.Close()
	r := nodes.New(0, ring, nil)
	defer r.Close()
	require.ErrorIs(t, r.OnConn(ctx, "k", func(*redis.Conn) error { return nil }), nodes.ErrNoConn, "OnConn on a Ring, want ErrNoConn")
}
