package redislock

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/renew"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
	"github.com/redislock-go/redislock/observe"
)

// Client obtains locks on one Redis (New) or on a majority of independent
// Redis masters (NewQuorum). It is safe for concurrent use. Close it when
// done: it owns a subscription connection for notified waiting and the
// workers of its background clean-up.
type Client struct {
	m     mode          // single (single.go) or quorum (quorum.go), chosen by the constructor
	nodes []*nodes.Node // every node: one in single mode
	opts  options       // the defaults of every call
	obs   *observers    // nil: no observer, no logger
	err   error         // reported by every call: an invalid client or option
	named bool          // NodeError messages name the node (quorum mode)

	live    *nodes.Pool // quorum fan-out calls on behalf of a waiting caller
	cleanup *nodes.Pool // background releases of partial or unknown grants

	mu     sync.Mutex
	closed bool              // guarded by mu
	wakers map[string]*waker // guarded by mu; notified waiting (wait.go)
	rn     *renew.Renewer    // guarded by mu; held locks' renewals, made on first use (renew.go)
}

// mode is how a Client takes, keeps and gives back a lock: on one node
// (single) or on a majority of its nodes (quorum). The constructors choose
// it; no other code asks which it is.
type mode interface {
	// check refuses the options o where the mode cannot honour them.
	check(o *options) error
	// obtain makes one attempt of r: a valid grant, an error matching
	// ErrNotObtained on contention, or another error; whatever it may have
	// granted is released unless it returns a grant.
	// r is a copy: a pointer would move the caller's request to the heap.
	obtain(ctx context.Context, r request) (*Lock, error)
	// nodeTimeout bounds one node's request for a lease of ttl.
	nodeTimeout(o *options, ttl time.Duration) time.Duration
	// ttl, refresh and release act on a held grant and count the nodes
	// that said yes (and, for ttl, the least PTTL among them), collecting
	// the nodes' errors; verdict turns those counts into the result.
	ttl(ctx context.Context, l *Lock) (least int64, ok int, errs []error)
	refresh(ctx context.Context, l *Lock, ttl time.Duration) (ok int, errs []error)
	release(ctx context.Context, l *Lock) (ok int, errs []error)
	verdict(ok int, errs []error) error
	// failed is the error of an operation that the nodes' errors errs
	// decided: in single mode the node's error, in quorum mode a
	// *QuorumError with err.
	failed(err error, errs []error) error
	// lost gives back what is left of a grant found lost by a refresh, or
	// confirmed too late (late): ctx is the refresh's.
	lost(ctx context.Context, l *Lock, late bool)
	// releaseLater releases l in the background and calls done with the
	// outcome.
	releaseLater(ctx context.Context, l *Lock, done func(error))
	// publish is how releases with o wake waiters; sharded whether
	// waiting uses sharded pub/sub when a call asks for it. (They take no
	// *options of a caller's stack, which an interface call would move to
	// the heap.)
	publish(o *options) script.Publish
	sharded(asked bool) bool
	// wakerFor returns where a waker for channel listens: rdb (nil: a
	// local waker) and the key of that waker in the Client; ok false when
	// waiters must poll.
	wakerFor(channel string, sharded bool) (rdb redis.UniversalClient, addr string, ok bool)
	// handOff releases l, passing the lock to a waiting caller of the
	// Client in the same step (single.go); handed false: it did nothing.
	handOff(ctx context.Context, l *Lock) (handed bool, err error)
	// fairLeave is what a fair Obtain call runs when it returns.
	fairLeave(r *request) func()
	// keepBatched has the Client's batched renewer renew l (renew.go); nil
	// when its locks are renewed one by one.
	keepBatched(l *Lock, ttl, interval time.Duration, lost func(cause error)) *kept
	// multi returns the single node of ObtainMulti, or why it has none.
	multi() (*single, error)
}

func newClient(rdbs []redis.UniversalClient, quorum bool, opts []ClientOption) *Client {
	cfg := newConfig(opts)
	c := &Client{
		opts:    cfg.defaults,
		obs:     newObservers(cfg.observers),
		live:    nodes.NewPool(nodes.MaxLive * len(rdbs)),
		cleanup: nodes.NewPool(nodes.MaxCleanup * len(rdbs)),
	}
	for i, rdb := range rdbs {
		c.nodes = append(c.nodes, nodes.New(i, rdb, c.obs.evicting(i)))
	}
	switch {
	case quorum:
		c.m, c.named = &quorumMode{c: c, now: cfg.wallClock}, true
	case len(c.nodes) == 1:
		c.m = &single{c: c, n: c.nodes[0]}
	}
	c.err = cfg.defaults.validate()
	if c.err == nil && c.m != nil {
		c.err = c.m.check(&cfg.defaults)
	}
	return c
}

// New returns a Client for one Redis: standalone, Sentinel (a failover
// client) or Cluster. opts set defaults for every call. Close never closes
// rdb.
//
// New cannot fail: a nil rdb (also a typed nil, such as a nil
// *redis.Client) or an invalid option is reported, as an error
// matching ErrInvalidArgument, by every call of the Client (Obtain, Run,
// Inspect...), before anything is sent to Redis.
func New(rdb redis.UniversalClient, opts ...ClientOption) *Client {
	if nodes.IsNil(rdb) {
		c := newClient(nil, false, opts)
		c.err = invalid("nil redis client")
		return c
	}
	return newClient([]redis.UniversalClient{rdb}, false, opts)
}

// NewQuorum returns a Client that takes each lock on a majority (N/2+1) of
// N independent Redis masters (the Redlock algorithm), with the same API as
// New; see the package guide (Quorum mode) for how it works and what it
// assumes. The list may not be empty, hold nil or hold the same client
// twice; an invalid option, or one that quorum mode does not support
// (WithFair, WithReplicas), is returned at once. Close never closes the
// clients.
func NewQuorum(rdbs []redis.UniversalClient, opts ...ClientOption) (*Client, error) {
	if len(rdbs) == 0 {
		return nil, invalid("no redis clients")
	}
	for i, a := range rdbs {
		if nodes.IsNil(a) {
			return nil, invalid("redis client %d is nil", i)
		}
		for j, b := range rdbs[:i] {
			if reflect.TypeOf(a) == reflect.TypeOf(b) && reflect.TypeOf(a).Comparable() && a == b {
				return nil, invalid("redis clients %d and %d are the same client", j, i)
			}
		}
	}
	c := newClient(rdbs, true, opts)
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
}

// Close waits for the client's background clean-up (releases of partial or
// unknown grants, each bounded by the release timeout; calls it stopped
// waiting for because their ctx ended or their timeout passed, and that
// go-redis has not returned yet, at most the release timeout), closes its
// subscription connection and stops its goroutines; Obtain calls still
// waiting fall back to their backoff. Further calls fail with ErrClosed;
// locks already obtained can still be refreshed and released (their
// quorum calls and clean-up then run on the caller's goroutine). Locks
// that Run or lease.Hold keep through the Client's batched renewal (single
// mode) are renewed no more: each is reported lost to its holder before
// Close returns (fn's ctx, Done), with a cause naming the closed client,
// and is still released by Run or Held.Release. It never closes the
// caller's redis clients, and so cannot end a call that go-redis still
// holds past that bound (a stalled Redis, without ContextTimeoutEnabled):
// such a call goes on until go-redis returns it (its ReadTimeout), and
// what it may have granted is released then.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.closeWakers()
	c.closeRenewer()
	// Calls abandoned to a stalled Redis settle (release what they may
	// have granted) once go-redis returns them: wait for that, at most the
	// release timeout, then for the clean-up they started.
	deadline := time.Now().Add(c.opts.releaseTimeout)
	for _, n := range c.nodes {
		n.Guarded.Wait(deadline)
	}
	c.cleanup.Close()
	c.live.Close()
	for _, n := range c.nodes {
		n.Close()
	}
	return nil
}

// callOptions resolves per-call options over the client's defaults.
func (c *Client) callOptions(opts []Option) (options, error) {
	if c == nil {
		return options{}, invalid("nil *Client")
	}
	if c.err != nil {
		return options{}, c.err
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return options{}, ErrClosed
	}
	if len(opts) == 0 {
		return c.opts, nil
	}
	o := c.opts
	o.errs = nil
	o.add(opts)
	if err := o.validate(); err != nil {
		return options{}, err
	}
	if err := c.m.check(&o); err != nil {
		return options{}, err
	}
	return o, nil
}

// Locker returns the Client as a lease.Locker: the contract that the
// pattern packages (leader election, deduplication) and code meant for any
// backend are written against. opts are defaults for its Obtain calls, over
// the Client's own; a call's lease.WithRetry and lease.WithHolder override
// them. Its locks are *Lock values.
func (c *Client) Locker(opts ...Option) lease.Locker {
	return backend.NewLocker(backend.Client[Option, *Lock]{
		Obtain: c.Obtain, Inspect: c.Inspect, WithRetry: WithRetry, WithHolder: WithHolder,
	}, opts...)
}

var _ lease.Lock = (*Lock)(nil)

// majority is how many nodes make a decision: 1 of 1 in single mode.
func (c *Client) majority() int { return len(c.nodes)/2 + 1 }

// unreachable reports whether the last call to the node (single mode), or
// to more nodes than a majority can spare (quorum mode), did not get
// through.
func (c *Client) unreachable() bool {
	down := 0
	for _, n := range c.nodes {
		if n.Down() {
			down++
		}
	}
	return down > len(c.nodes)-c.majority()
}

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

// do is call for a nodes.Op: op's Run as f, its Settle as settle.
func (c *Client) do(ctx context.Context, n *nodes.Node, timeout time.Duration, pipeline bool, what string, op nodes.Op) error {
	if err := n.Do(ctx, timeout, pipeline, op); err != nil {
		return c.nodeErr(ctx, n.Index, what, err)
	}
	return nil
}

// nodeErr wraps a node's error and tells the observers.
func (c *Client) nodeErr(ctx context.Context, node int, op string, err error) error {
	ne := &NodeError{Node: node, Err: err, quorum: c.named}
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
	if ns := c.nodes; len(ns) == 1 {
		var v T
		err := c.call(ctx, ns[0], timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter) (err error) {
			v, err = f(ctx, rdb, arg)
			return err
		}, nil)
		if err != nil {
			return append(dst, nodes.Reply[T]{Err: err}) // v may still be written (abandoned)
		}
		return append(dst, nodes.Reply[T]{Val: v})
	}
	round := fanoutOn(c, ctx, c.nodes, timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter, _ int) (T, error) {
		return f(ctx, rdb, arg)
	}, nil)
	rs, missing := round.Gather(timeout, nil)
	round.Stop(nil)
	return append(append(dst, rs...), timedOut[T](c, ctx, missing, op)...)
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
	return nodes.Detach(ctx)
}

// background returns ctx, detached, for the Client's background work,
// whose calls are always bounded by their timeout (nodes.Bounded).
func background(ctx context.Context) context.Context { return nodes.Bounded(detach(ctx)) }

// releaseOn releases l on node n in the background, on the clean-up pool,
// on ctx without its cancellation; a clean-up that cannot run or fails is
// told to the observers.
func (c *Client) releaseOn(ctx context.Context, l *Lock, n *nodes.Node) {
	ctx = background(ctx)
	if !n.Background(c.cleanup, func() { c.releaseNow(ctx, l, n) }) {
		c.cleanupFailed(ctx, l, n.Index, c.nodeErr(ctx, n.Index, "release", nodes.ErrBusy))
	}
}

// releaseNow is releaseOn's release, on the caller's goroutine (a settle,
// which runs on the goroutine of the call it settles).
func (c *Client) releaseNow(ctx context.Context, l *Lock, n *nodes.Node) {
	ctx = background(ctx)
	if err := c.call(ctx, n, l.opts.releaseTimeout, false, "release", func(ctx context.Context, rdb redis.Scripter) error {
		_, err := releaseScript(ctx, rdb, l)
		return err
	}, nil); err != nil {
		c.cleanupFailed(ctx, l, n.Index, err)
	}
}
