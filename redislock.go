package redislock

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/renew"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
	"github.com/redislock-go/redislock/observe"
)

// Client obtains locks on one Redis (New) or on a majority of independent
// Redis masters (NewQuorum). It is safe for concurrent use. Close it when
// done: it owns a subscription connection for notified waiting and the
// workers of its background clean-up.
type Client struct {
	m      mode       // single (single.go) or quorum (quorum.go), chosen by the constructor
	single *single    // single mode's own features; nil in quorum mode
	set    nodes.Set  // every node (one in single mode), its quorum fan-out calls' live pool
	opts   options    // the defaults of every call
	obs    *observers // nil: no observer, no logger
	err    error      // reported by every call: an invalid client or option
	named  bool       // NodeError messages name the node (quorum mode)

	cleanup *nodes.Pool // background releases of partial or unknown grants

	mu     sync.Mutex
	closed bool              // guarded by mu
	wakers map[string]*waker // guarded by mu; notified waiting (handoff.go)
	rn     *renew.Renewer    // guarded by mu; held locks' renewals, made on first use (renew.go)
}

// mode is how a Client takes, keeps and gives back a lock: on one node
// (single) or on a majority of its nodes (quorum). The constructors choose
// it. What only single mode has (handoffs, fair queues, notified waiting
// across Clients, replicas, batched renewal, several keys) hangs off
// Client.single instead.
type mode interface {
	// check refuses the options o where the mode cannot honour them.
	check(o *options) error
	// obtain makes one attempt of r: a valid grant, an error matching
	// ErrNotObtained on contention, or another error; whatever it may have
	// granted is released unless it returns a grant.
	// r is a copy: a pointer would move the caller's request to the heap.
	obtain(ctx context.Context, r request) (*Lock, error)
	// ttl, refresh and release act on a held grant and count the nodes
	// that said yes (and, for ttl, the least PTTL among them), collecting
	// the nodes' errors; Client.verdict turns those counts into the result.
	ttl(ctx context.Context, l *Lock) (least int64, ok int, errs []error)
	refresh(ctx context.Context, l *Lock, ttl time.Duration) (ok int, errs []error)
	release(ctx context.Context, l *Lock) (ok int, errs []error)
	// lost gives back what is left of a grant found lost by a refresh, or
	// confirmed too late (late): ctx is the refresh's.
	lost(ctx context.Context, l *Lock, late bool)
}

func newClient(rdbs []redis.UniversalClient, quorum bool, opts []ClientOption) *Client {
	cfg := newConfig(opts)
	c := &Client{
		opts:    cfg.defaults,
		obs:     newObservers(cfg.observers),
		cleanup: nodes.NewPool(nodes.MaxCleanup * len(rdbs)),
	}
	c.set = nodes.Set{Live: nodes.NewPool(nodes.MaxLive * len(rdbs)), Wrap: c.nodeErr}
	for i, rdb := range rdbs {
		c.set.Nodes = append(c.set.Nodes, nodes.New(i, rdb, c.obs.evicting(i)))
	}
	switch {
	case quorum:
		c.m, c.named = &quorumMode{c: c, now: cfg.wallClock}, true
	case len(c.set.Nodes) == 1:
		c.single = &single{c: c, n: c.set.Nodes[0]}
		c.m = c.single
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
	// Calls left to a stalled Redis release what they may have granted
	// once go-redis returns them: wait for that, at most the release
	// timeout, then for the clean-up they started.
	deadline := time.Now().Add(c.opts.releaseTimeout)
	for _, n := range c.set.Nodes {
		n.Guarded.Wait(deadline)
	}
	c.cleanup.Close()
	c.set.Live.Close()
	for _, n := range c.set.Nodes {
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

// unreachable reports whether the last call to the node (single mode), or
// to more nodes than a majority can spare (quorum mode), did not get
// through.
func (c *Client) unreachable() bool {
	down := 0
	for _, n := range c.set.Nodes {
		if n.Down() {
			down++
		}
	}
	return down > len(c.set.Nodes)-c.set.Majority()
}

// nodeErr wraps a node's error and tells the observers.
func (c *Client) nodeErr(ctx context.Context, node int, op string, err error) error {
	ne := &NodeError{Node: node, Err: err, quorum: c.named}
	if c.obs != nil {
		c.obs.nodeFailed(ctx, observe.NodeEvent{Node: node, Op: op, Err: ne})
	}
	return ne
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

// releaseOn gives l back on node n now, on the caller's goroutine (an
// onLate's, a clean-up worker's, a fan-out's), on ctx without its
// cancellation, bounded by the release timeout (releaseCall), and returns
// the node's error: a clean-up tells it to the observers (cleanedUp).
func (c *Client) releaseOn(ctx context.Context, l *Lock, n *nodes.Node) error {
	return c.set.Do(background(ctx), n, l.opts.releaseTimeout, false, "release", &releaseCall{l: l})
}

// verdict turns per-node outcomes of an operation on a held grant into its
// result: nil on a majority (the node, in single mode), ErrNotHeld when
// enough nodes definitely said no, else the nodes' errors (failed).
func (c *Client) verdict(ok int, errs []error) error {
	switch q := c.set.Majority(); {
	case ok >= q:
		return nil
	case ok+len(errs) < q:
		return ErrNotHeld
	}
	return c.failed(ErrNoQuorum, errs)
}

// failed is the error of an operation that the nodes' errors errs
// decided: in single mode the node's error, in quorum mode a *QuorumError
// with err.
func (c *Client) failed(err error, errs []error) error {
	if len(errs) == 1 && c.single != nil {
		return errs[0]
	}
	return &QuorumError{Err: err, Nodes: errs}
}

// releaseLater gives l back in the background, on the clean-up pool
// counted on the first node, on ctx without its cancellation, as Release
// does (the mode's release; it wakes the Client's next waiter for the key),
// and then tells done the outcome as Release returns it, with ErrBusy
// wrapped when the pool refused the release. It is for a lock no caller
// will use: a handoff nobody took, or one Run gives up without waiting.
func (c *Client) releaseLater(ctx context.Context, l *Lock, done func(error)) {
	ctx = background(ctx)
	n := c.set.Nodes[0]
	if err := c.inBackground(ctx, l.key, n, func() {
		released, errs := c.m.release(ctx, l)
		if released > 0 {
			c.wakeLocal(l)
		}
		for _, err := range errs {
			c.cleanedUp(ctx, l.key, n.Index, err)
		}
		done(c.verdict(released, errs))
	}); err != nil {
		done(err)
	}
}

// cleanUp gives back what l's attempt may have left on each of the nodes
// ns (releaseOn), in the background: one clean-up per node, counted on
// it, on ctx without its cancellation. It is for a grant whose outcome is
// unknown or that was given up: a late or partial quorum grant, an attempt
// whose reply was lost. Failures are told to the observers (cleanedUp).
func (c *Client) cleanUp(ctx context.Context, l *Lock, ns []*nodes.Node) {
	ctx = background(ctx)
	for _, n := range ns {
		_ = c.inBackground(ctx, l.key, n, func() { c.cleanedUp(ctx, l.key, n.Index, c.releaseOn(ctx, l, n)) })
	}
}

// inBackground runs f, a clean-up of key on node n, on the clean-up pool.
// When the pool refuses it (the node has as many clean-ups in flight as
// it may, or no worker is free), the clean-up failed: it tells the
// observers and returns the error (ErrBusy wrapped).
func (c *Client) inBackground(ctx context.Context, key string, n *nodes.Node, f func()) error {
	if n.Background(c.cleanup, f) {
		return nil
	}
	err := c.nodeErr(ctx, n.Index, "release", nodes.ErrBusy)
	c.cleanedUp(ctx, key, n.Index, err)
	return err
}
