package redislock

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
	"github.com/redislock-go/redislock/observe"
)

// WithObserver adds o to the Client's observers: any value that implements
// one or more of the event interfaces of package observe (ObtainObserver,
// WaitObserver, RefreshObserver, ReleaseObserver, LossObserver,
// NodeObserver, SubscriptionObserver, CleanupObserver,
// StaleFenceObserver, EvictionObserver). The option may be given more than once: each
// observer gets every event it implements a method for. A value that
// implements none of them is an invalid option. The metric and trace
// adapters (extra/redislockprom, extra/redislockotel) are Observers; see
// package observe for the rules they follow. A Client without observers
// pays nothing for them.
func WithObserver(o observe.Observer) ClientOption {
	return clientOptionFunc(func(c *config) {
		if !anObserver(o) {
			c.defaults.fail(invalid("%T implements none of the observer interfaces", o))
			return
		}
		c.observers = append(c.observers, o)
	})
}

// WithLogger logs the Client's events to l (observe.NewLogger): grants and
// releases at Debug; losses, failed renewals, failed clean-ups and, once
// per server, a Redis whose maxmemory-policy can evict lock keys at Warn;
// node failures and replaced subscriptions at Info; always with the key,
// the fence and, where it applies, the hold time or wait, never the token.
// Default: no logging.
func WithLogger(l *slog.Logger) ClientOption {
	return clientOptionFunc(func(c *config) {
		if l == nil {
			c.defaults.fail(invalid("nil logger"))
			return
		}
		c.observers = append(c.observers, observe.NewLogger(l))
	})
}

func anObserver(o observe.Observer) bool {
	switch o.(type) {
	case observe.ObtainObserver, observe.WaitObserver, observe.RefreshObserver, observe.ReleaseObserver,
		observe.LossObserver, observe.NodeObserver, observe.SubscriptionObserver, observe.CleanupObserver,
		observe.StaleFenceObserver, observe.EvictionObserver:
		return true
	}
	return false
}

// observers dispatches events to a Client's Observers, sorted by the
// interfaces they implement once, in New. A Client without observers has a
// nil *observers, and every event site checks for that before it builds an
// event.
type observers struct {
	obtain  []observe.ObtainObserver
	wait    []observe.WaitObserver
	refresh []observe.RefreshObserver
	release []observe.ReleaseObserver
	loss    []observe.LossObserver
	node    []observe.NodeObserver
	sub     []observe.SubscriptionObserver
	cleanup []observe.CleanupObserver
	stale   []observe.StaleFenceObserver
	evict   []observe.EvictionObserver
}

func newObservers(list []observe.Observer) *observers {
	if len(list) == 0 {
		return nil
	}
	return &observers{
		obtain:  observe.Select[observe.ObtainObserver](list),
		wait:    observe.Select[observe.WaitObserver](list),
		refresh: observe.Select[observe.RefreshObserver](list),
		release: observe.Select[observe.ReleaseObserver](list),
		loss:    observe.Select[observe.LossObserver](list),
		node:    observe.Select[observe.NodeObserver](list),
		sub:     observe.Select[observe.SubscriptionObserver](list),
		cleanup: observe.Select[observe.CleanupObserver](list),
		stale:   observe.Select[observe.StaleFenceObserver](list),
		evict:   observe.Select[observe.EvictionObserver](list),
	}
}

func (o *observers) obtainStart(ctx context.Context, e observe.ObtainStartEvent) context.Context {
	for _, x := range o.obtain {
		ctx = x.ObtainStart(ctx, e)
	}
	return ctx
}

func (o *observers) obtainDone(ctx context.Context, e observe.ObtainDoneEvent) {
	for _, x := range o.obtain {
		x.ObtainDone(ctx, e)
	}
}

func (o *observers) waitStart(ctx context.Context, e observe.WaitEvent) {
	for _, x := range o.wait {
		x.WaitStart(ctx, e)
	}
}

func (o *observers) refreshStart(ctx context.Context, e observe.RefreshStartEvent) context.Context {
	for _, x := range o.refresh {
		ctx = x.RefreshStart(ctx, e)
	}
	return ctx
}

func (o *observers) refreshDone(ctx context.Context, e observe.RefreshDoneEvent) {
	for _, x := range o.refresh {
		x.RefreshDone(ctx, e)
	}
}

func (o *observers) releaseStart(ctx context.Context, e observe.ReleaseStartEvent) context.Context {
	for _, x := range o.release {
		ctx = x.ReleaseStart(ctx, e)
	}
	return ctx
}

func (o *observers) releaseDone(ctx context.Context, e observe.ReleaseDoneEvent) {
	for _, x := range o.release {
		x.ReleaseDone(ctx, e)
	}
}

func (o *observers) lockLost(ctx context.Context, e observe.LossEvent) {
	for _, x := range o.loss {
		x.LockLost(ctx, e)
	}
}

func (o *observers) nodeFailed(ctx context.Context, e observe.NodeEvent) {
	for _, x := range o.node {
		x.NodeFailed(ctx, e)
	}
}

func (o *observers) resubscribed(e observe.SubscriptionEvent) {
	for _, x := range o.sub {
		x.Resubscribed(e)
	}
}

func (o *observers) staleFence(ctx context.Context, e observe.StaleFenceEvent) {
	for _, x := range o.stale {
		x.StaleFence(ctx, e)
	}
}

// evicting returns what node i tells of a server whose eviction policy
// can evict lock keys (nodes.New): the EvictionObservers are told; nil,
// so that no policy is read, when there are none.
func (o *observers) evicting(i int) func(nodes.Policy) {
	if o == nil || len(o.evict) == 0 {
		return nil
	}
	return func(p nodes.Policy) {
		e := observe.EvictionEvent{Node: i, Addr: p.Addr, Policy: p.Name, MaxMemory: p.MaxMemory}
		for _, x := range o.evict {
			x.EvictionPolicy(e)
		}
	}
}

// cleanedUp tells the observers of a clean-up of key on node that failed
// with err; nil, one that did not fail, tells nothing.
func (c *Client) cleanedUp(ctx context.Context, key string, node int, err error) {
	if err != nil && c.obs != nil {
		for _, x := range c.obs.cleanup {
			x.CleanupFailed(ctx, observe.CleanupEvent{Key: key, Node: node, Err: err})
		}
	}
}

// Inspect reports who holds key, as Redis sees it now: whether it is held,
// the holder identity its grant recorded (WithHolder), its fence and its
// remaining TTL, and how many callers wait for it as far as Redis and this
// Client know (Waiters: a lower bound; see lease.Info). The token is never
// reported. In quorum mode the lock counts
// as held when a majority of the nodes hold the same grant; TTL is then the
// least over them. An unreachable Redis, or fewer than a majority of the
// nodes answering, is an error; so is a lock key that redislock did not
// write.
func (c *Client) Inspect(ctx context.Context, key string) (lease.Info, error) {
	o, err := c.callOptions(nil)
	if err != nil {
		return lease.Info{}, err
	}
	if err := backend.CheckKey(key); err != nil {
		return lease.Info{}, err
	}
	k := keys.New(o.prefix, key)
	type answer struct {
		grant   script.Value
		pttl    time.Duration
		waiters int // the fair queue's size, at least 1 when the grant is marked
	}
	var buf [1]nodes.Reply[answer]
	rs := nodes.All(ctx, &c.set, buf[:0], o.releaseTimeout, false, "inspect", []string{k.Lock, k.Queue()}, func(ctx context.Context, rdb redis.Scripter, ks []string) (answer, error) {
		v, pttl, exists, queued, err := script.Inspect(ctx, rdb, ks)
		if err != nil || !exists {
			return answer{waiters: int(queued)}, err
		}
		if pttl == script.NoExpiry {
			return answer{}, errNoExpiry
		}
		g, ok := script.ParseValue(v)
		if !ok {
			return answer{}, fmt.Errorf("redislock: lock key holds %q, not written by redislock", v)
		}
		if g.Marked {
			queued = max(queued, 1)
		}
		return answer{g, time.Duration(pttl) * time.Millisecond, int(queued)}, nil
	})
	type count struct {
		answer
		n int
	}
	grants := make(map[string]*count)
	var errs []error
	info := lease.Info{Key: key}
	for _, r := range rs {
		if r.Err == nil {
			info.Waiters = max(info.Waiters, r.Val.waiters)
		}
		switch {
		case r.Err != nil:
			errs = append(errs, r.Err)
		case r.Val.grant.Token != "":
			g := grants[r.Val.grant.Token]
			if g == nil {
				g = &count{answer: r.Val}
				grants[r.Val.grant.Token] = g
			}
			g.n++
			g.pttl = min(g.pttl, r.Val.pttl)
			// A node a refresh brought into the grant keeps its own last
			// fence when that is higher (scripts/join.lua): the grant's
			// fence is the least.
			g.grant.Fence = min(g.grant.Fence, r.Val.grant.Fence)
		}
	}
	if len(c.set.Nodes)-len(errs) < c.set.Majority() {
		return lease.Info{}, c.failed(ErrNoQuorum, errs)
	}
	if o.notify && !c.sharded(o.sharded) {
		if w := c.localWaker(); w != nil {
			n, _ := w.Waiting(k.Wake) // this Client's own waiters
			info.Waiters = max(info.Waiters, n)
		}
	}
	for _, g := range grants {
		if g.n >= c.set.Majority() {
			info.Held, info.Holder, info.Fence, info.TTL = true, g.grant.Holder, g.grant.Fence, g.pttl
		}
	}
	return info, nil
}
