package redislock

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
)

// call runs f on node n, bounded by timeout (see nodes.Node.Call), and
// returns its error as a *NodeError, telling the observers.
func (c *Client) call(ctx context.Context, n *nodes.Node, timeout time.Duration, pipeline bool, op string, f func(ctx context.Context, rdb redis.Scripter) error) error {
	if err := n.Call(ctx, timeout, pipeline, f); err != nil {
		return c.nodeErr(ctx, n.Index, op, err)
	}
	return nil
}

// nodeErr wraps a node's error and tells the observers.
func (c *Client) nodeErr(ctx context.Context, node int, op string, err error) error {
	ne := &NodeError{Node: node, Err: err}
	if c.obs != nil {
		c.obs.nodeFailed(ctx, NodeEvent{Node: node, Op: op, Err: ne})
	}
	return ne
}

// onNodes runs f(ctx, rdb, arg) on every node and appends their replies to
// dst: on the caller's goroutine for one node, else in parallel on the live
// pool, waiting for every node or timeout, whichever comes first. A node
// not heard from by then counts as timed out; its late reply is dropped.
// Errors are *NodeError values. (f takes arg rather than capturing it, so
// that a single-mode call allocates no closure.)
func onNodes[T, A any](c *Client, dst []nodes.Reply[T], ctx context.Context, timeout time.Duration, pipeline bool, op string,
	arg A, f func(ctx context.Context, rdb redis.Scripter, arg A) (T, error)) []nodes.Reply[T] {
	if len(c.nodes) == 1 {
		var v T
		err := c.call(ctx, c.nodes[0], timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter) (err error) {
			v, err = f(ctx, rdb, arg)
			return err
		})
		return append(dst, nodes.Reply[T]{Val: v, Err: err})
	}
	round := fanout(c, ctx, timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter) (T, error) {
		return f(ctx, rdb, arg)
	})
	rs, missing := round.Gather(timeout, nil)
	round.Stop(nil)
	return append(append(dst, rs...), timedOut[T](c, ctx, missing, op)...)
}

// fanout starts f on every node on the live pool.
func fanout[T any](c *Client, ctx context.Context, timeout time.Duration, pipeline bool, op string,
	f func(ctx context.Context, rdb redis.Scripter) (T, error)) *nodes.Round[T] {
	return nodes.Fanout(c.live, c.nodes, func(n *nodes.Node) (v T, err error) {
		err = c.call(ctx, n, timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter) (err error) {
			v, err = f(ctx, rdb)
			return err
		})
		return v, err
	})
}

// detach returns ctx without its cancellation and deadline, keeping its
// values: for releases and clean-up, which must run after the caller gave
// up. A context that cannot be cancelled is returned as it is.
func detach(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// timedOut returns a timeout reply for each missing node.
func timedOut[T any](c *Client, ctx context.Context, missing []int, op string) []nodes.Reply[T] {
	var rs []nodes.Reply[T]
	for _, i := range missing {
		rs = append(rs, nodes.Reply[T]{Node: i, Err: c.nodeErr(ctx, i, op, context.DeadlineExceeded)})
	}
	return rs
}

// tally counts the replies for which ok is true and collects the errors.
func tally[T any](rs []nodes.Reply[T], ok func(T) bool) (n int, errs []error) {
	for _, r := range rs {
		switch {
		case r.Err != nil:
			errs = append(errs, r.Err)
		case ok(r.Val):
			n++
		}
	}
	return n, errs
}

// verdict turns per-node outcomes of an operation on a held grant into its
// result: nil on a majority, ErrNotHeld when enough nodes definitely said
// no, else the nodes' errors (a *QuorumError matching ErrNoQuorum in quorum
// mode).
func (c *Client) verdict(ok int, errs []error) error {
	switch {
	case ok >= c.majority():
		return nil
	case ok+len(errs) < c.majority():
		return ErrNotHeld
	default:
		return c.nodesErr(ErrNoQuorum, errs)
	}
}

// nodesErr is the error of an operation that the nodes' errors decided: in
// single mode the node's error, in quorum mode a *QuorumError with err.
func (c *Client) nodesErr(err error, errs []error) error {
	if !c.quorum && len(errs) == 1 {
		return errs[0]
	}
	return &QuorumError{Err: err, Nodes: errs}
}

// QuorumError is the outcome of a quorum operation that had no majority:
// Err (ErrNoQuorum when too few nodes answered, ErrNotObtained when a
// majority answered but other holders denied the grant) and the errors of
// the nodes that failed, each a *NodeError. errors.Is matches Err and each
// node's error; the message is one line.
type QuorumError struct {
	Err   error
	Nodes []error
}

func (e *QuorumError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	for i, n := range e.Nodes {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(strings.TrimPrefix(n.Error(), "redislock: "))
	}
	return b.String()
}

// Unwrap returns Err and the nodes' errors.
func (e *QuorumError) Unwrap() []error { return append([]error{e.Err}, e.Nodes...) }
