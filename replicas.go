package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/script"
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

// waitLate is how late Redis may end a WAIT, with room to spare: an idle
// Redis checks blocked clients' timeouts at its cron ticks, 1/hz apart
// (100 ms at the default hz 10); two ticks.
const waitLate = 200 * time.Millisecond

// awaitReplicas runs WAIT on conn, after the write that o's grant or
// refresh, sent at sent, made there, for the lease valid until until: nil
// when enough replicas acknowledged it in time, a *ReplicaError when too
// few did, or WAIT's own error. WAIT waits the replica timeout, but never
// past ctx's deadline, nor past until less the largest of a tenth of the
// validity left, the write's round trip (its reply takes as long) and
// waitLate, so that its answer comes while the lease is valid (a lease
// already over needs no replicas); and at least 1 ms (WAIT 0 would block
// for ever).
func awaitReplicas(ctx context.Context, conn *redis.Conn, o *options, sent, until time.Time) error {
	left := time.Until(until)
	d := min(o.replicaTimeout, left-max(left/10, time.Since(sent), waitLate))
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)-waitLate)
	}
	d = max(d.Truncate(time.Millisecond), time.Millisecond)
	n, err := conn.Do(ctx, "WAIT", o.replicas, d.Milliseconds()).Int()
	switch {
	case err != nil:
		return err
	case n < o.replicas:
		return &ReplicaError{Want: o.replicas, Acked: n, Timeout: d}
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

// renewAcked runs the batches (WithReplicas o) on one connection per node
// that serves them now (the master of their slots on Cluster), each
// node's followed by one WAIT, and returns per batch the *NodeError of a
// WAIT that too few replicas answered (nil: acknowledged). A batch whose
// node failed gets the error (none of that node's renewals is
// acknowledged).
func (c *Client) renewAcked(ctx context.Context, batches []script.Batch, ttl time.Duration, o *options) (unacked []error) {
	sent := time.Now()
	until := o.validUntil(sent, ttl) // of the renewals, sent from now
	unacked = make([]error, len(batches))
	byNode := map[string][]int{}
	var order []string
	cc, cluster := c.nodes[0].RDB.(*redis.ClusterClient)
	for i, b := range batches {
		node := ""
		if cluster {
			if m, err := cc.MasterForKey(ctx, b.Keys[0]); err == nil {
				node = m.Options().Addr
			}
		}
		if byNode[node] == nil {
			order = append(order, node)
		}
		byNode[node] = append(byNode[node], i)
	}
	for _, node := range order {
		is := byNode[node]
		err := c.onConn(ctx, batches[is[0]].Keys[0], func(conn *redis.Conn) error {
			for _, i := range is {
				b := &batches[i]
				if b.Status, b.Err = script.BatchRefresh(ctx, conn, b.Keys, b.Tokens, ttl.Milliseconds(), nil); b.Err != nil {
					return b.Err
				}
			}
			return awaitReplicas(ctx, conn, o, sent, until)
		})
		var re *ReplicaError
		switch {
		case errors.As(err, &re):
			for _, i := range is {
				unacked[i] = c.nodeErr(ctx, c.nodes[0].Index, "refresh", err)
			}
		case err != nil: // no WAIT ran: none of the node's renewals is acknowledged
			for _, i := range is {
				batches[i].Err = err
			}
		}
	}
	return unacked
}
