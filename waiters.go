package redislock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/wake"
	"github.com/redislock-go/redislock/observe"
)

// waker multiplexes the Client's waiters (internal/wake): a handoff asks
// for a *request and delivers a *Lock.
type waker = wake.Waker[*request, *Lock]

// waitSub is one waiter's registration with a waker.
type waitSub = wake.Sub[*request, *Lock]

// wakerFor returns the waker for channel, creating it on first use: one per
// Client, or in sharded mode on Redis Cluster one per master node (sharded
// channels live on the node that owns their slot). Quorum mode has a local
// waker (no node's pub/sub can announce a release of the majority); a Ring
// has none (it cannot hold one subscription for keys on different shards:
// waiters poll). nil after Close.
func (c *Client) wakerFor(channel string, sharded bool) *waker {
	var rdb redis.UniversalClient // quorum mode: a local waker
	addr := ""
	if !c.quorum {
		n := c.nodes[0]
		if n.Kind == nodes.Ring {
			return nil
		}
		rdb = n.RDB
		if sharded {
			addr = "sharded"
			if cc, ok := rdb.(*redis.ClusterClient); ok {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				node, err := cc.MasterForKey(ctx, channel)
				cancel()
				if err != nil {
					return nil // no notification: the waiter polls
				}
				rdb, addr = node, "sharded "+node.Options().Addr
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if c.wakers == nil {
		c.wakers = make(map[string]*waker)
	}
	w := c.wakers[addr]
	if w == nil {
		if rdb == nil {
			w = wake.NewLocal[*request, *Lock]()
		} else {
			w = wake.New[*request, *Lock](rdb, sharded, c.resubscribed)
		}
		c.wakers[addr] = w
	}
	return w
}

// resubscribed tells the observers that a waker replaced its connection.
func (c *Client) resubscribed(cause error) {
	if c.obs != nil {
		c.obs.resubscribed(observe.SubscriptionEvent{Err: cause})
	}
}

// sharded reports whether waiting with o uses sharded pub/sub (never in
// quorum mode, which has no pub/sub).
func (c *Client) sharded(o *options) bool { return o.sharded && !c.quorum }

// localWaker returns the Client's waker for plain (not sharded) pub/sub,
// nil if no caller has waited yet: the one that handoffs and the in-Client
// queue work with.
func (c *Client) localWaker() *waker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wakers[""]
}

// closeWakers stops every waker of the client; called by Close.
func (c *Client) closeWakers() {
	c.mu.Lock()
	ws := c.wakers
	c.wakers = nil
	c.mu.Unlock()
	for _, w := range ws {
		w.Close()
	}
}

// queueBehindLocalWaiters reports whether a new Obtain with a retry
// strategy should skip its first attempt because other callers of this
// Client are waiting, notified, for the same key: waking the longest-waiting
// one per release then grants in arrival order within the Client, and a
// caller that just released cannot re-take the lock ahead of them.
func (c *Client) queueBehindLocalWaiters(o *options, k keys.Lock) bool {
	if !o.notify || o.fair || c.sharded(o) {
		return false
	}
	if _, ok := o.retry.Backoff(1); !ok {
		return false // a single attempt must try
	}
	w := c.localWaker()
	if w == nil {
		return false
	}
	n, ready := w.Waiting(k.Wake)
	return ready && n > 0
}

// waiters returns how many callers of the Client wait for the key, one
// more that is about to, or -1 when the Client does not keep count
// (polling, sharded pub/sub).
func (c *Client) waiters(o *options, k keys.Lock) int {
	if !o.notify || c.sharded(o) {
		return -1
	}
	w := c.localWaker()
	if w == nil {
		return 1
	}
	n, _ := w.Waiting(k.Wake)
	return n + 1
}
