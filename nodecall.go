package redislock

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/observe"
)

// call runs f on node n, bounded by timeout and ctx whatever go-redis'
// options (see nodes.Node.Call), and returns its error as a *NodeError,
// telling the observers. When the call is abandoned (nodes.IsAbandoned:
// ctx ended or timeout passed first), settle(sctx, err) runs once it
// returns, on its goroutine, its own calls on sctx (nil: nothing to
// settle); f's captured results must then not be read.
func (c *Client) call(ctx context.Context, n *nodes.Node, timeout time.Duration, pipeline bool, op string,
	f func(ctx context.Context, rdb redis.Scripter) error, settle func(ctx context.Context, err error)) error {
	if err := n.Call(ctx, timeout, pipeline, f, settle); err != nil {
		return c.nodeErr(ctx, n.Index, op, err)
	}
	return nil
}

// nodeErr wraps a node's error and tells the observers.
func (c *Client) nodeErr(ctx context.Context, node int, op string, err error) error {
	ne := &NodeError{Node: node, Err: err, quorum: c.quorum}
	if c.obs != nil {
		c.obs.nodeFailed(ctx, observe.NodeEvent{Node: node, Op: op, Err: ne})
	}
	return ne
}

// onNodes runs f(ctx, rdb, arg) on every node and appends their replies to
// dst: on the caller's goroutine for one node, else in parallel on the live
// pool, waiting for every node or timeout, whichever comes first (for
// Inspect and the Store, which read every node's answer). A node not heard
// from by then counts as timed out; its late reply is dropped. Errors are
// *NodeError values.
func onNodes[T, A any](c *Client, dst []nodes.Reply[T], ctx context.Context, timeout time.Duration, pipeline bool, op string,
	arg A, f func(ctx context.Context, rdb redis.Scripter, arg A) (T, error)) []nodes.Reply[T] {
	if len(c.nodes) == 1 {
		var v T
		err := c.call(ctx, c.nodes[0], timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter) (err error) {
			v, err = f(ctx, rdb, arg)
			return err
		}, nil)
		if err != nil {
			return append(dst, nodes.Reply[T]{Err: err}) // v may still be written (abandoned)
		}
		return append(dst, nodes.Reply[T]{Val: v})
	}
	round := fanout(c, ctx, timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter) (T, error) {
		return f(ctx, rdb, arg)
	}, nil)
	rs, missing := round.Gather(timeout, nil)
	round.Stop(nil)
	return append(append(dst, rs...), timedOut[T](c, ctx, missing, op)...)
}

// onGrant runs f(ctx, rdb, arg), an operation on a held grant, on the nodes
// ns (nil: every node) and counts the replies for which yes is true,
// collecting the errors (each a *NodeError): on the caller's goroutine in
// single mode, else in parallel on the live pool, returning as soon as the
// outcome is certain (see decided), every node answered, or timeout has
// passed. Only at the timeout does a node not heard from count as timed
// out. The calls not waited for finish in the background on the live pool
// (Close waits for them); their replies are dropped. (f takes arg rather
// than capturing it, so that a single-mode call allocates no closure.)
func onGrant[T, A any](c *Client, ctx context.Context, ns []*nodes.Node, timeout time.Duration, pipeline bool, op string,
	arg A, f func(ctx context.Context, rdb redis.Scripter, arg A) (T, error), yes func(T) bool) (ok int, errs []error) {
	if ns == nil {
		ns = c.nodes
	}
	if len(ns) == 1 && !c.quorum {
		var v T
		err := c.call(ctx, ns[0], timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter) (err error) {
			v, err = f(ctx, rdb, arg)
			return err
		}, nil)
		switch {
		case err != nil:
			return 0, []error{err}
		case yes(v):
			return 1, nil
		}
		return 0, nil
	}
	round := fanoutOn(c, ctx, ns, timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter) (T, error) {
		return f(ctx, rdb, arg)
	}, nil)
	q, left, early := c.majority(), len(ns), false
	_, missing := round.Gather(timeout, func(r nodes.Reply[T]) bool {
		left--
		switch {
		case r.Err != nil:
			errs = append(errs, asNodeErr(c, ctx, r, op))
		case yes(r.Val):
			ok++
		}
		early = decided(q, ok, len(errs), left)
		return early
	})
	round.Stop(nil)
	if !early {
		for _, r := range timedOut[T](c, ctx, missing, op) {
			errs = append(errs, r.Err)
		}
	}
	return ok, errs
}

// decided reports whether a quorum call on a held grant can stop waiting:
// ok nodes said yes, errs failed, left have not answered. It is certain
// when a majority said yes (success), or when no majority of yes remains
// possible even if every failed node had said yes (ErrNotHeld). A call
// with too few yes but enough failures for either verdict waits for the
// rest (a majority that did not answer: the verdict is then ErrNoQuorum).
func decided(q, ok, errs, left int) bool {
	return ok >= q || ok+errs+left < q
}

// asNodeErr is a reply's error as a *NodeError: a call that Fanout
// refused (nodes.ErrBusy) comes unwrapped.
func asNodeErr[T any](c *Client, ctx context.Context, r nodes.Reply[T], op string) error {
	if errors.Is(r.Err, nodes.ErrBusy) {
		var ne *NodeError
		if !errors.As(r.Err, &ne) {
			return c.nodeErr(ctx, r.Node, op, r.Err)
		}
	}
	return r.Err
}

// fanout starts f on every node on the live pool.
func fanout[T any](c *Client, ctx context.Context, timeout time.Duration, pipeline bool, op string,
	f func(ctx context.Context, rdb redis.Scripter) (T, error), settle func(ctx context.Context, node int)) *nodes.Round[T] {
	return fanoutOn(c, ctx, c.nodes, timeout, pipeline, op, f, settle)
}

// fanoutOn starts f on the nodes ns on the live pool; settle (nil: none)
// settles a node's abandoned call once it returns (see call).
func fanoutOn[T any](c *Client, ctx context.Context, ns []*nodes.Node, timeout time.Duration, pipeline bool, op string,
	f func(ctx context.Context, rdb redis.Scripter) (T, error), settle func(ctx context.Context, node int)) *nodes.Round[T] {
	if ctx.Done() == nil {
		ctx = nodes.Bounded(ctx) // the live pool's calls are background work
	}
	return nodes.Fanout(c.live, ns, func(n *nodes.Node) (T, error) {
		var v T
		var late func(context.Context, error)
		if settle != nil {
			late = func(ctx context.Context, _ error) { settle(ctx, n.Index) }
		}
		err := c.call(ctx, n, timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter) (err error) {
			v, err = f(ctx, rdb)
			return err
		}, late)
		if err != nil {
			var zero T // v may still be written (abandoned)
			return zero, err
		}
		return v, nil
	})
}

// detach returns ctx without its cancellation and deadline, keeping its
// values: for releases and clean-up, which must run after the caller gave
// up. A context that cannot be cancelled is returned as it is.
func detach(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	// The caller's ctx could end: it wants its calls bounded, so the
	// detached ones are bounded by their timeout (nodes.Bounded).
	return nodes.Bounded(context.WithoutCancel(ctx))
}

// background returns ctx, detached, for the Client's background work,
// whose calls are always bounded by their timeout (nodes.Bounded).
func background(ctx context.Context) context.Context { return nodes.Bounded(detach(ctx)) }

// timedOut returns a timeout reply for each missing node.
func timedOut[T any](c *Client, ctx context.Context, missing []int, op string) []nodes.Reply[T] {
	var rs []nodes.Reply[T]
	for _, i := range missing {
		rs = append(rs, nodes.Reply[T]{Node: i, Err: c.nodeErr(ctx, i, op, context.DeadlineExceeded)})
	}
	return rs
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
