package redislock

import (
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/renew"
)

// Client obtains locks on one Redis (New) or on a majority of independent
// Redis masters (NewQuorum). It is safe for concurrent use. Close it when
// done: it owns a subscription connection for notified waiting and the
// workers of its background clean-up.
type Client struct {
	nodes  []*nodes.Node
	quorum bool
	opts   options    // the defaults of every call
	obs    *observers // nil: no observer, no logger
	err    error      // reported by every call: an invalid client or option

	seen atomic.Int64 // quorum mode: highest fence seen on any node

	live    *nodes.Pool // quorum fan-out calls on behalf of a waiting caller
	cleanup *nodes.Pool // background releases of partial or unknown grants

	mu     sync.Mutex
	closed bool              // guarded by mu
	wakers map[string]*waker // guarded by mu; notified waiting (waiters.go)
	rn     *renew.Renewer    // guarded by mu; held locks' renewals, made on first use (renewer.go)
}

func newClient(rdbs []redis.UniversalClient, quorum bool, opts []ClientOption) *Client {
	cfg := newConfig(opts)
	c := &Client{
		quorum:  quorum,
		opts:    cfg.defaults,
		obs:     newObservers(cfg.observers),
		live:    nodes.NewPool(nodes.MaxLive * len(rdbs)),
		cleanup: nodes.NewPool(nodes.MaxCleanup * len(rdbs)),
	}
	for i, rdb := range rdbs {
		c.nodes = append(c.nodes, nodes.New(i, rdb))
	}
	c.err = cfg.defaults.validate()
	if c.err == nil && len(c.nodes) > 0 {
		c.err = c.checkMode(&cfg.defaults)
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
	if err := c.checkMode(&o); err != nil {
		return options{}, err
	}
	return o, nil
}

// checkMode refuses the options that the Client's mode cannot honour: the
// defaults when the Client is made (NewQuorum returns the error, New's
// calls report it), a call's own options at the call.
func (c *Client) checkMode(o *options) error {
	if o.fair && c.quorum {
		return invalid("WithFair is not supported in quorum mode")
	}
	return c.checkReplicas(o)
}

// majority is how many nodes make a decision.
func (c *Client) majority() int { return len(c.nodes)/2 + 1 }

// cluster reports whether the Client is on one Redis Cluster.
func (c *Client) cluster() bool { return !c.quorum && c.nodes[0].Kind == nodes.Cluster }

// nodeTimeout bounds one node's request for a lease of ttl.
func (c *Client) nodeTimeout(o *options, ttl time.Duration) time.Duration {
	switch {
	case o.nodeTimeout > 0:
		return o.nodeTimeout
	case c.quorum:
		return min(max(ttl/10, 50*time.Millisecond), ttl-o.drift(ttl))
	default:
		return ttl - o.drift(ttl)
	}
}

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
