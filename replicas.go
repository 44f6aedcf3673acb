package redislock

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Replica acknowledgement (WithReplicas): WAIT counts the replicas that
// have acknowledged every write of its own connection so far, so the
// script and its WAIT run on one connection, taken from the pool of the
// node that serves the key (the master of its slot on Cluster).

// errNoConn: the client has no connection of its own to the key's node.
var errNoConn = errors.New("redislock: WithReplicas needs a *redis.Client or *redis.ClusterClient")

// onConn runs f on one connection to the node that serves key. On a
// Cluster a redirection (the slot moved: f's script did not run) makes the
// client reload its slot map, for the next call.
func (c *Client) onConn(ctx context.Context, key string, f func(conn *redis.Conn) error) error {
	var node *redis.Client
	cc, cluster := c.nodes[0].RDB.(*redis.ClusterClient)
	switch r := c.nodes[0].RDB.(type) {
	case *redis.Client:
		node = r
	case *redis.ClusterClient:
		m, err := r.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		node = m
	default:
		return errNoConn
	}
	conn := node.Conn()
	defer conn.Close()
	err := f(conn)
	if cluster && err != nil {
		if redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK") {
			cc.ReloadState(ctx)
		}
	}
	return err
}

// awaitReplicas runs WAIT on conn, after the write that o's grant or
// refresh made there: nil when enough replicas acknowledged it in time, a
// *ReplicaError when too few did, or WAIT's own error.
func awaitReplicas(ctx context.Context, conn *redis.Conn, o *options) error {
	n, err := conn.Do(ctx, "WAIT", o.replicas, o.replicaTimeout.Milliseconds()).Int()
	switch {
	case err != nil:
		return err
	case n < o.replicas:
		return &ReplicaError{Want: o.replicas, Acked: n, Timeout: o.replicaTimeout}
	}
	return nil
}

// checkReplicas refuses WithReplicas where it cannot work.
func (c *Client) checkReplicas(o *options) error {
	switch {
	case o.replicas == 0:
		return nil
	case c.quorum:
		return invalid("WithReplicas is not supported in quorum mode")
	}
	switch c.nodes[0].RDB.(type) {
	case *redis.Client, *redis.ClusterClient:
		return nil
	}
	return invalid("WithReplicas is not supported on %T", c.nodes[0].RDB)
}
