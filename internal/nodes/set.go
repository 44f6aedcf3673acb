package nodes

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Set is a client's nodes as its calls use them: the nodes, the live pool
// their fan-out calls run on, and Wrap, which turns a node's error into the
// client's own (and tells its observers).
type Set struct {
	Nodes []*Node
	Live  *Pool
	Wrap  func(ctx context.Context, node int, op string, err error) error
}

// Majority is how many nodes make a decision: 1 of 1 for one node.
func (s *Set) Majority() int { return len(s.Nodes)/2 + 1 }

// Call runs f on node n, bounded by timeout and ctx whatever go-redis'
// options (see Node.Call), and returns its error wrapped (Wrap). When the
// call is abandoned (IsLate: ctx ended or timeout passed first),
// settle(sctx, err) runs once it returns, on its goroutine, its own calls
// on sctx (nil: nothing to settle); f's captured results must then not be
// read.
func (s *Set) Call(ctx context.Context, n *Node, timeout time.Duration, pipeline bool, op string,
	f func(ctx context.Context, rdb redis.Scripter) error, settle func(ctx context.Context, err error)) error {
	if err := n.Call(ctx, timeout, pipeline, f, settle); err != nil {
		return s.Wrap(ctx, n.Index, op, err)
	}
	return nil
}

// Do is Call for an Op: its Run as f, its OnLate as settle.
func (s *Set) Do(ctx context.Context, n *Node, timeout time.Duration, pipeline bool, what string, op Op) error {
	if err := n.Do(ctx, timeout, pipeline, op); err != nil {
		return s.Wrap(ctx, n.Index, what, err)
	}
	return nil
}

// All runs f(ctx, rdb, arg) on every node and appends their replies to
// dst: on the caller's goroutine for one node, else in parallel on the live
// pool, waiting for every node or timeout, whichever comes first (for
// reads that need every node's answer). A node not heard from by then
// counts as timed out; its late reply is dropped. Errors are wrapped.
func All[T, A any](ctx context.Context, s *Set, dst []Reply[T], timeout time.Duration, pipeline bool, op string,
	arg A, f func(ctx context.Context, rdb redis.Scripter, arg A) (T, error)) []Reply[T] {
	if ns := s.Nodes; len(ns) == 1 {
		v, err := callValue(ctx, s, ns[0], timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter, _ int) (T, error) {
			return f(ctx, rdb, arg)
		}, nil)
		return append(dst, Reply[T]{Val: v, Err: err})
	}
	round := Fan(ctx, s, s.Nodes, timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter, _ int) (T, error) {
		return f(ctx, rdb, arg)
	}, nil)
	rs, missing := round.Gather(timeout, nil)
	round.Stop(nil)
	return append(append(dst, rs...), TimedOut[T](ctx, s, missing, op)...)
}

// callValue is Call for an f that returns a value: the value by value,
// the zero value on error; onLate (nil: none) is told what an abandoned
// call returned, once it has.
func callValue[T any](ctx context.Context, s *Set, n *Node, timeout time.Duration, pipeline bool, op string,
	f func(ctx context.Context, rdb redis.Scripter, node int) (T, error), onLate func(ctx context.Context, node int, v T, err error)) (T, error) {
	var v T
	var late func(context.Context, error)
	if onLate != nil {
		// On the call's goroutine, after f: v is the call's.
		late = func(ctx context.Context, err error) { onLate(ctx, n.Index, v, err) }
	}
	err := s.Call(ctx, n, timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter) (err error) {
		v, err = f(ctx, rdb, n.Index)
		return err
	}, late)
	if err != nil {
		var zero T // v may still be written by an abandoned call
		return zero, err
	}
	return v, nil
}

// Fan starts f on the nodes ns on the live pool; onLate (nil: none) is
// told what a node's abandoned call returned, once it has.
func Fan[T any](ctx context.Context, s *Set, ns []*Node, timeout time.Duration, pipeline bool, op string,
	f func(ctx context.Context, rdb redis.Scripter, node int) (T, error), onLate func(ctx context.Context, node int, v T, err error)) *Round[T] {
	if ctx.Done() == nil {
		ctx = Bounded(ctx) // the live pool's calls are background work
	}
	return Fanout(s.Live, ns, func(n *Node) (T, error) {
		return callValue(ctx, s, n, timeout, pipeline, op, f, onLate)
	})
}

// TimedOut returns a timeout reply for each missing node, saying why the
// node did not answer where its dial probe knows (Node.NoReply).
func TimedOut[T any](ctx context.Context, s *Set, missing []int, op string) []Reply[T] {
	var rs []Reply[T]
	for _, i := range missing {
		rs = append(rs, Reply[T]{Node: i, Err: s.Wrap(ctx, i, op, s.Nodes[i].NoReply(context.DeadlineExceeded))})
	}
	return rs
}

// ReplyErr is a reply's error, wrapped: a call that Fanout refused
// (ErrBusy) comes unwrapped.
func ReplyErr[T any](ctx context.Context, s *Set, r Reply[T], op string) error {
	if r.Err == ErrBusy {
		return s.Wrap(ctx, r.Node, op, r.Err)
	}
	return r.Err
}

// Decide runs f on the nodes ns (nil: every node) and counts the replies
// for which yes is true, collecting the errors (wrapped): in parallel on
// the live pool, returning as soon as the outcome is certain (see
// decided), every node answered, or timeout has passed. Only at the
// timeout does a node not heard from count as timed out. The calls not
// waited for finish in the background on the live pool; answered (nil:
// none) is told of every node's outcome, whenever it comes: a reply in
// time or late, or an abandoned call once it returned (on its goroutine;
// answered must not block).
func Decide[T any](ctx context.Context, s *Set, ns []*Node, timeout time.Duration, pipeline bool, op string,
	f func(ctx context.Context, rdb redis.Scripter, node int) (T, error), yes func(T) bool,
	answered func(ctx context.Context, node int, v T, err error)) (ok int, errs []error) {
	if ns == nil {
		ns = s.Nodes
	}
	tell := func(r Reply[T]) {}
	if answered != nil {
		tell = func(r Reply[T]) {
			if !IsLate(r.Err) { // its onLate tells
				answered(ctx, r.Node, r.Val, r.Err)
			}
		}
	}
	round := Fan(ctx, s, ns, timeout, pipeline, op, f, answered)
	q, left, early := s.Majority(), len(ns), false
	_, missing := round.Gather(timeout, func(r Reply[T]) bool {
		tell(r)
		left--
		switch {
		case r.Err != nil:
			errs = append(errs, ReplyErr(ctx, s, r, op))
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
		for _, r := range TimedOut[T](ctx, s, missing, op) {
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

// Value is Call for an f that returns a value: f(ctx, rdb, arg), the
// value by value, the zero value on error; onLate (nil: none) is told what
// a late call returned, once it has, on its goroutine. (arg spares f a
// closure of its own.)
func Value[T, A any](ctx context.Context, s *Set, n *Node, timeout time.Duration, pipeline bool, op string,
	arg A, f func(ctx context.Context, rdb redis.Scripter, arg A) (T, error), onLate func(ctx context.Context, v T, err error)) (T, error) {
	var v T
	var late func(context.Context, error)
	if onLate != nil {
		// On the call's goroutine, after f: v is the call's.
		late = func(ctx context.Context, err error) { onLate(ctx, v, err) }
	}
	err := s.Call(ctx, n, timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter) (err error) {
		v, err = f(ctx, rdb, arg)
		return err
	}, late)
	if err != nil {
		var zero T // v may still be written by a late call
		return zero, err
	}
	return v, nil
}

// ValueOf is Value for an f that needs no arg.
func ValueOf[T any](ctx context.Context, s *Set, n *Node, timeout time.Duration, pipeline bool, op string,
	f func(ctx context.Context, rdb redis.Scripter) (T, error), onLate func(ctx context.Context, v T, err error)) (T, error) {
	return Value(ctx, s, n, timeout, pipeline, op, f, callF[T], onLate)
}

// callF calls f: ValueOf's f as Value's arg, without a closure.
func callF[T any](ctx context.Context, rdb redis.Scripter, f func(ctx context.Context, rdb redis.Scripter) (T, error)) (T, error) {
	return f(ctx, rdb)
}

// OnceValue is Once for an f that returns a value: the value by value,
// the zero value on error.
func OnceValue[T any](ctx context.Context, rdb any, f func(ctx context.Context) (T, error)) (T, error) {
	var v T
	if err := Once(ctx, rdb, func(ctx context.Context) (err error) {
		v, err = f(ctx)
		return err
	}); err != nil {
		var zero T // v may still be written by a guarded call
		return zero, err
	}
	return v, nil
}
