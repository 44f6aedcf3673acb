package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
)

// The fan-out of quorum mode: one operation sent to many nodes at once on
// the live pool, decided at the majority, its late replies settled in the
// background.

// onGrant runs f(ctx, rdb, arg), an operation on a held grant, on the nodes
// ns (nil: every node) and counts the replies for which yes is true,
// collecting the errors (each a *NodeError): in parallel on the live pool,
// returning as soon as the outcome is certain (see decided), every node
// answered, or timeout has passed. Only at the timeout does a node not
// heard from count as timed out. The calls not waited for finish in the
// background on the live pool (Close waits for them); their replies are
// dropped.
func onGrant[T, A any](qm *quorumMode, ctx context.Context, ns []*nodes.Node, timeout time.Duration, pipeline bool, op string,
	arg A, f func(ctx context.Context, rdb redis.Scripter, arg A) (T, error), yes func(T) bool) (ok int, errs []error) {
	return onGrantEach(qm, ctx, ns, timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter, _ int) (T, error) {
		return f(ctx, rdb, arg)
	}, yes, nil)
}

// onGrantEach is onGrant with the node's index given to f, and with
// answered (nil: none) told of every node's outcome, whenever it comes: a
// reply in time or late, or an abandoned call once it returned (on its
// goroutine; answered must not block).
func onGrantEach[T any](qm *quorumMode, ctx context.Context, ns []*nodes.Node, timeout time.Duration, pipeline bool, op string,
	f func(ctx context.Context, rdb redis.Scripter, node int) (T, error), yes func(T) bool,
	answered func(ctx context.Context, node int, v T, err error)) (ok int, errs []error) {
	c := qm.c
	if ns == nil {
		ns = c.nodes
	}
	var settle func(ctx context.Context, node int, v T, err error)
	tell := func(r nodes.Reply[T]) {}
	if answered != nil {
		settle = answered
		tell = func(r nodes.Reply[T]) {
			if !nodes.IsAbandoned(r.Err) { // its settle tells
				answered(ctx, r.Node, r.Val, r.Err)
			}
		}
	}
	round := fanoutOn(c, ctx, ns, timeout, pipeline, op, f, settle)
	q, left, early := c.majority(), len(ns), false
	_, missing := round.Gather(timeout, func(r nodes.Reply[T]) bool {
		tell(r)
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
	if answered != nil {
		round.Stop(tell)
	} else {
		round.Stop(nil)
	}
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

// fanoutOn starts f on the nodes ns on the live pool; settle (nil: none)
// settles a node's abandoned call once it returns (see Client.call), with
// what the call returned.
func fanoutOn[T any](c *Client, ctx context.Context, ns []*nodes.Node, timeout time.Duration, pipeline bool, op string,
	f func(ctx context.Context, rdb redis.Scripter, node int) (T, error), settle func(ctx context.Context, node int, v T, err error)) *nodes.Round[T] {
	if ctx.Done() == nil {
		ctx = nodes.Bounded(ctx) // the live pool's calls are background work
	}
	return nodes.Fanout(c.live, ns, func(n *nodes.Node) (T, error) {
		var v T
		var late func(context.Context, error)
		if settle != nil {
			// On the call's goroutine, after f: v is the call's.
			late = func(ctx context.Context, err error) { settle(ctx, n.Index, v, err) }
		}
		err := c.call(ctx, n, timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter) (err error) {
			v, err = f(ctx, rdb, n.Index)
			return err
		}, late)
		if err != nil {
			var zero T // v may still be written (abandoned)
			return zero, err
		}
		return v, nil
	})
}

// timedOut returns a timeout reply for each missing node, saying why the
// node did not answer where its dial probe knows (nodes.Node.NoReply).
func timedOut[T any](c *Client, ctx context.Context, missing []int, op string) []nodes.Reply[T] {
	var rs []nodes.Reply[T]
	for _, i := range missing {
		rs = append(rs, nodes.Reply[T]{Node: i, Err: c.nodeErr(ctx, i, op, c.nodes[i].NoReply(context.DeadlineExceeded))})
	}
	return rs
}
