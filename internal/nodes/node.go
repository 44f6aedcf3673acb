// Package nodes is the one path from redislock to Redis: a client's nodes
// with what their go-redis clients honour (computed once), auto-pipelining
// under load, bounded calls in flight per node, and the fan-out of one
// operation to every node of a quorum with its late replies settled in the
// background. It knows no lock or client of redislock.
package nodes

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kind is the topology of a node's go-redis client.
type Kind uint8

// The kinds of go-redis clients.
const (
	Standalone Kind = iota // *redis.Client: one server, or a Sentinel failover client
	Cluster                // *redis.ClusterClient
	Ring                   // *redis.Ring: shards that hold different keys
	Other                  // another redis.UniversalClient
)

// AutoPipelineAbove is how many calls of a client may be in flight to one
// node before further calls are batched through go-redis' AutoPipeliner
// (a *redis.Client or *redis.ClusterClient): below it a lone caller never waits for a batch to
// fill, and hot-key handoffs, a single call each, are not slowed.
const AutoPipelineAbove = 16

// Limits on calls in flight to one node. A node with that many calls that
// have not returned (a blackholed node, with go-redis not honouring context
// deadlines) refuses more at once (ErrBusy) instead of growing without
// bound; calls from callers' own goroutines (single mode) are not counted.
const (
	MaxLive    = 256 // fan-out calls on behalf of a waiting caller
	MaxCleanup = 64  // clean-up releases in the background
)

// ErrBusy is the error of a call refused because its node already has the
// most calls in flight it may have.
var ErrBusy = errors.New("redislock: node has too many calls in flight")

// Node is one Redis node of a client.
type Node struct {
	Index     int
	RDB       redis.UniversalClient
	Kind      Kind
	Deadlines bool // go-redis applies context deadlines to the node's socket

	inflight atomic.Int32 // live calls (auto-pipelining's load)
	down     atomic.Bool  // the last call that ended did not reach the server (Down)
	reached  atomic.Bool  // a call has reached the server
	probes   *prober      // dial probes beside calls that may not reach it (probe.go)
	policy   policyCheck  // the eviction policy check, on the first call (policy.go)
	fanned   atomic.Int32 // of them, fan-out calls (MaxLive)
	cleaning atomic.Int32 // clean-up calls (MaxCleanup)
	Guarded  Guarded      // its abandoned guarded calls (MaxAbandoned)
	workers  *Pool        // run the guarded calls, stopped by Close

	apOnce sync.Once
	ap     redis.Scripter // nil: not a *redis.Client, or go-redis refused

	asyncOnce sync.Once
	async     *redis.AutoPipeliner // deferred face (deferredFace); nil: none
}

// IsNil reports whether rdb is nil, or a nil pointer (or other nil value)
// in a non-nil interface, such as (*redis.Client)(nil): a client that
// cannot be called.
func IsNil(rdb any) bool {
	if rdb == nil {
		return true
	}
	switch v := reflect.ValueOf(rdb); v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// New describes the go-redis client rdb, node index of its client; rdb
// must not be nil (IsNil). evicting, if not nil, is told once of each of
// the node's servers whose eviction policy can evict lock keys, checked
// after the node's first call (policy.go).
func New(index int, rdb redis.UniversalClient, evicting func(Policy)) *Node {
	n := &Node{Index: index, RDB: rdb, Kind: Other, Deadlines: honours(rdb), workers: NewPool(MaxGuardWorkers)}
	n.probes = newProber(rdb)
	n.policy.evicting = evicting
	n.policy.ctx, n.policy.cancel = context.WithCancel(context.Background())
	n.policy.done = make(chan struct{})
	switch rdb.(type) {
	case *redis.Client:
		n.Kind = Standalone
	case *redis.ClusterClient:
		n.Kind = Cluster
	case *redis.Ring:
		n.Kind = Ring
	}
	return n
}

// Call runs f on the node, bounded by timeout and ctx, whatever go-redis'
// options: it is not sent when ctx has already ended (an error matching
// ctx's, for which NotSent is true); where go-redis applies deadlines it
// runs on the caller's goroutine with timeout as ctx's deadline; on a ctx
// that cannot end and is not marked Bounded it runs on the caller's
// goroutine, bounded by go-redis' own timeouts; otherwise, where go-redis
// does not apply deadlines (no ContextTimeoutEnabled, or a call batched
// through the AutoPipeliner), it is guarded: the caller stops waiting when
// ctx ends or
// timeout passes, with an error matching ErrAbandoned, and the call goes
// on until go-redis returns; then settle(sctx, err) runs on its goroutine
// (nil: nothing to settle), where it may make calls of its own on sctx
// (ctx without its cancellation). With pipeline, calls beyond
// AutoPipelineAbove in flight are batched. A node with MaxAbandoned
// abandoned calls makes a further guarded call (but a settle's) wait for
// one of them to end, within the same bounds; one that did not get to go
// out is not sent.
func (n *Node) Call(ctx context.Context, timeout time.Duration, pipeline bool, f func(ctx context.Context, rdb redis.Scripter) error,
	settle func(ctx context.Context, err error)) error {
	return n.call(ctx, timeout, pipeline, nil, f, settle)
}

// Op is a call of Node.Do: Run makes it on rdb, OnLate settles it once an
// abandoned Run has returned (Call's f and settle). A pointer to a value
// the caller has anyway passes as an Op without an allocation.
type Op interface {
	Run(ctx context.Context, rdb redis.Scripter) error
	OnLate(ctx context.Context, err error)
}

// Do is Call with op's Run and OnLate as f and settle, but for a batched
// call on a *redis.Client: that one waits for its replies on the caller's
// goroutine, within the same bounds, and only a call the caller stopped
// waiting for goes on on a worker, to be settled. So with pipeline set,
// op.Run must make its calls through rdb alone.
func (n *Node) Do(ctx context.Context, timeout time.Duration, pipeline bool, op Op) error {
	return n.call(ctx, timeout, pipeline, op, nil, nil)
}

// call is Call and Do: op's methods, or f and settle. The first call that
// reaches the node starts its eviction check once it has returned
// (policy.go); a call on a node that no call has reached yet, or whose
// last call did not, has a dial probe started if it has not returned soon,
// which says why if it gets no reply (probe.go).
func (n *Node) call(ctx context.Context, timeout time.Duration, pipeline bool, op Op, f func(ctx context.Context, rdb redis.Scripter) error,
	settle func(ctx context.Context, err error)) error {
	if err := ctx.Err(); err != nil {
		return &callError{cause: err, kind: errNotSent}
	}
	if n.reached.Load() && !n.down.Load() {
		err := n.bounded(ctx, timeout, pipeline, op, f, settle)
		n.checkPolicy()
		return err
	}
	start := time.Now()
	stop := n.probes.after(probeDelay(timeout))
	err := n.bounded(ctx, timeout, pipeline, op, f, settle)
	if !stop() {
		n.probes.fired(start)
	}
	if err != nil {
		err = n.probes.explain(ctx, err, start, timeout)
	}
	if n.reached.Load() {
		n.checkPolicy()
	}
	return err
}

// bounded runs a call, bounded by timeout and ctx (see Call).
func (n *Node) bounded(ctx context.Context, timeout time.Duration, pipeline bool, op Op, f func(ctx context.Context, rdb redis.Scripter) error,
	settle func(ctx context.Context, err error)) error {
	k := n.inflight.Add(1)
	batch := pipeline && k > AutoPipelineAbove
	run := func(ctx context.Context) error {
		rdb := n.scripter(batch)
		if op != nil {
			return op.Run(ctx, rdb)
		}
		return f(ctx, rdb)
	}
	switch {
	case n.Deadlines && !batch:
		ctx, cancel, dc := withDeadline(ctx, timeout) // deadline.go
		err := run(ctx)
		switch {
		case dc != nil:
			dc.end()
		case cancel != nil:
			cancel()
		}
		n.inflight.Add(-1)
		n.noteReached(err)
		return err
	case ctx.Done() == nil && ctx.Value(bounded{}) == nil:
		// A ctx that cannot end, not marked Bounded: go-redis' own
		// timeouts bound the call, on the caller's goroutine.
		err := run(ctx)
		n.inflight.Add(-1)
		n.noteReached(err)
		return err
	}
	if n.Guarded.abandoned.Load() >= MaxAbandoned && ctx.Value(settling{}) == nil {
		if err := n.Guarded.wait(ctx, timeout); err != nil {
			n.inflight.Add(-1)
			return err
		}
	}
	if batch && op != nil {
		if ap := n.deferredFace(); ap != nil {
			return n.deferred(ctx, timeout, ap, op)
		}
	}
	g := guards.Get().(*guarded)
	g.ctx, g.rdb, g.op, g.f, g.settle, g.n, g.count = ctx, n.scripter(batch), op, f, settle, n, &n.Guarded
	err := guard(g, n.workers, timeout)
	if IsLate(err) {
		n.noteReached(err) // a timeout: the node did not answer in time
	}
	return err
}

// Close stops the workers of the node's guarded calls: idle ones exit at
// once, busy ones (calls abandoned to a stalled server) when go-redis
// returns their call; later guarded calls get goroutines of their own. It
// cancels the node's eviction check and dial probe, and waits for them
// (a probe at most probeCloseWait).
func (n *Node) Close() {
	n.policy.cancel()
	n.probes.close()
	n.policy.wg.Wait()
	n.workers.Stop()
}

// noteReached records whether a call that ended with err reached the
// server: it did when it succeeded or the server answered with an error
// reply; it did not on a network error or a timeout. A call cancelled by
// its caller tells nothing.
func (n *Node) noteReached(err error) {
	switch {
	case err == nil || isReply(err):
		if n.down.Load() {
			n.down.Store(false)
		}
		if !n.reached.Load() {
			n.reached.Store(true)
		}
	case errors.Is(err, context.Canceled):
	default:
		if !n.down.Load() {
			n.down.Store(true)
		}
	}
}

// isReply reports whether err is an error reply of the server (kept out of
// noteReached, so that a call without error allocates nothing).
func isReply(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply)
}

// Down reports whether the node's last call that ended did not reach the
// server (a network error or a timeout): the node is unreachable until a
// call gets through again.
func (n *Node) Down() bool { return n.down.Load() }

// scripter returns where a call goes: the node's AutoPipeliner (set up on
// first use; cached by go-redis and closed with the go-redis client) when
// batching, else the client itself.
func (n *Node) scripter(batch bool) redis.Scripter {
	if batch {
		n.apOnce.Do(func() {
			var ap *redis.AutoPipeliner
			var err error
			switch rdb := n.RDB.(type) {
			case *redis.Client:
				ap, err = rdb.AutoPipeline()
			case *redis.ClusterClient:
				ap, err = rdb.AutoPipeline() // one pipeline per node the batch's keys live on
			default:
				return
			}
			if err == nil {
				n.ap = ap
			}
		})
		if n.ap != nil {
			return n.ap
		}
	}
	return n.RDB
}

// Background runs f, a clean-up call on the node, on a worker of pool, and
// reports whether it does: a node that already has MaxCleanup clean-up
// calls in flight, or a pool without a free worker, refuses (the caller
// reports the clean-up as failed). f must not wait for other calls.
func (n *Node) Background(pool *Pool, f func()) bool {
	if !admit(&n.cleaning, MaxCleanup) {
		return false
	}
	if !pool.TryGo(func() {
		defer n.cleaning.Add(-1)
		f()
	}) {
		n.cleaning.Add(-1)
		return false
	}
	return true
}

// InFlight reports how many fan-out and clean-up calls the node has in
// flight (tests, and the observers).
func (n *Node) InFlight() (fanned, cleaning int) {
	return int(n.fanned.Load()), int(n.cleaning.Load())
}

// Pipelined reports whether the node has set up auto-pipelining, either
// face (tests).
func (n *Node) Pipelined() bool { return n.ap != nil || n.async != nil }

// Deferring reports whether the node has set up its deferred
// AutoPipeliner, for batched Ops (tests).
func (n *Node) Deferring() bool { return n.async != nil }

// admit takes one of the node's slots of a kind, or reports that it has
// none left.
func admit(slots *atomic.Int32, limit int32) bool {
	if slots.Add(1) > limit {
		slots.Add(-1)
		return false
	}
	return true
}
