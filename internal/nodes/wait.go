package nodes

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Replica acknowledgement: WAIT counts the replicas that have acknowledged
// every write of its own connection so far, so a script and its WAIT run
// on one connection, taken from the pool of the server that serves the
// key (the master of its slot on Cluster).

// ErrNoConn: the node's client has no connection of its own to a key's
// server (a Ring, a user's client).
var ErrNoConn = errors.New("redislock: WithReplicas needs a *redis.Client or *redis.ClusterClient")

// OwnConns reports whether the node's client can give a connection of its
// own to the server of a key (OnConn): a *redis.Client or a
// *redis.ClusterClient.
func (n *Node) OwnConns() bool { return n.Kind == Standalone || n.Kind == Cluster }

// OnConn runs f on one connection to the server that serves key. On a
// Cluster a redirection (the slot moved: f's script did not run) makes the
// client reload its slot map, for the next call.
func (n *Node) OnConn(ctx context.Context, key string, f func(conn *redis.Conn) error) error {
	var server *redis.Client
	cc, cluster := n.RDB.(*redis.ClusterClient)
	switch r := n.RDB.(type) {
	case *redis.Client:
		server = r
	case *redis.ClusterClient:
		m, err := r.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		server = m
	default:
		return ErrNoConn
	}
	conn := server.Conn()
	defer conn.Close()
	err := f(conn)
	if cluster && err != nil {
		if redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK") {
			cc.ReloadState(ctx)
		}
	}
	return err
}

// Wait runs WAIT replicas timeoutMS on conn, after the write made there,
// and returns how many replicas acknowledged it.
func Wait(ctx context.Context, conn *redis.Conn, replicas int, timeoutMS int64) (acked int, err error) {
	return conn.Do(ctx, "WAIT", replicas, timeoutMS).Int()
}

// OnConns runs f once per server that serves keys now (the master of
// their slots on Cluster; the one server otherwise), on one connection to
// it (OnConn), with the indexes of the keys it serves, in the order of
// their first key. It returns, per key, the error of its server's f.
func (n *Node) OnConns(ctx context.Context, keys []string, f func(conn *redis.Conn, is []int) error) []error {
	errs := make([]error, len(keys))
	byServer := map[string][]int{}
	var order []string
	cc, cluster := n.RDB.(*redis.ClusterClient)
	for i, k := range keys {
		server := ""
		if cluster {
			if m, err := cc.MasterForKey(ctx, k); err == nil {
				server = m.Options().Addr
			}
		}
		if byServer[server] == nil {
			order = append(order, server)
		}
		byServer[server] = append(byServer[server], i)
	}
	for _, server := range order {
		is := byServer[server]
		err := n.OnConn(ctx, keys[is[0]], func(conn *redis.Conn) error { return f(conn, is) })
		for _, i := range is {
			errs[i] = err
		}
	}
	return errs
}

// ReloadOnFault makes a Cluster client reload its slot map when a call
// failed without a reply from Redis (a refused connection, a timeout: its
// master may be gone), so that the next calls follow a failover rather
// than wait for go-redis' own reload, which comes on MOVED or when the map
// is 10 s old. go-redis runs at most one reload at a time.
func (n *Node) ReloadOnFault(ctx context.Context, err error) {
	var reply redis.Error
	if err == nil || errors.As(err, &reply) {
		return
	}
	if cc, ok := n.RDB.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
}

// MasterAddr returns the address of the master that serves key now on a
// Cluster; ok is false elsewhere, or when the Cluster cannot tell.
func (n *Node) MasterAddr(ctx context.Context, key string) (addr string, ok bool) {
	cc, cluster := n.RDB.(*redis.ClusterClient)
	if !cluster {
		return "", false
	}
	m, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return "", false
	}
	return m.Options().Addr, true
}
