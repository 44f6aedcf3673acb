package redislock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/internal/wake"
	"github.com/redislock-go/redislock/observe"
)

// maxHandoffs is how many times in a row a lock is handed over within a
// Client before a Release lets every Client compete for it again: waiters
// of other Clients see the lock held throughout a chain of handoffs.
const maxHandoffs = 16

// handOff releases l and passes the lock to the longest-waiting caller of
// this Client for its key, if there is one (notified, not fair, not
// sharded), in one release.lua call: the waiter's fresh token takes the
// lock with its own TTL and the next fence, in the same atomic step. Where
// Redis cannot write that grant (out of memory) the call releases l all
// the same, and the waiter, woken, tries on its own. It reports handed =
// false when there is no such waiter (Release then releases as usual),
// else Release's result for l.
func (s *single) handOff(ctx context.Context, l *Lock) (handed bool, err error) {
	c := s.c
	if l.handoffs >= maxHandoffs || !l.opts.notify || l.opts.fair || l.opts.sharded {
		return false, nil
	}
	w := c.localWaker()
	if w == nil {
		return false, nil
	}
	sub, req := w.Claim(l.keys.Wake)
	if sub == nil {
		return false, nil
	}
	next := req.newLock()
	next.handoffs = l.handoffs + 1
	next.start = time.Now()
	rep, err := nodes.ValueOf(ctx, &c.set, s.n, l.opts.releaseTimeout, l.opts.autoPipeline, "handoff", func(ctx context.Context, rdb redis.Scripter) (r handoffReply, err error) {
		r.released, r.fence, err = script.Handoff{Keys: l.keys.Boxed[:1], Token: l.arg, RecordTTL: recordTTL(l.currentTTL(), l.opts.releaseTimeout, l.ttlArg),
			Publish: s.publish(&l.opts), To: next.arg, TTL: next.ttlArg, Holder: next.opts.holder}.Run(ctx, rdb)
		return r, err
	}, func(ctx context.Context, _ handoffReply, _ error) {
		c.cleanedUp(ctx, next.key, s.n.Index, c.releaseOn(ctx, next, s.n))
	})
	released, fence := rep.released, rep.fence
	switch {
	case err != nil:
		// Unknown outcome: the waiter's token may hold the lock (given
		// back by the onLate above once a late call has returned).
		w.Deliver(sub, nil, false)
		if !nodes.NoOutcome(err) {
			c.releaseLater(ctx, next, noObserver)
		}
		return true, err
	case fence > 0:
		next.fence = fence
		if next.confirmFrom(&next.opts, next.start, req.ttl) != nil || !w.Deliver(sub, next, true) {
			w.Deliver(sub, nil, false)
			c.releaseLater(ctx, next, noObserver)
		}
	default:
		w.Deliver(sub, nil, false)
		if released {
			c.wakeLocal(l) // released without handoff: the waiter tries
		}
	}
	if !released {
		return true, ErrNotHeld
	}
	return true, nil
}

// handoffReply is what a handoff call answers: whether it released l, and
// the fence of the waiter's grant (0: none).
type handoffReply struct {
	released bool
	fence    int64
}

// subscribe registers a waiter on channel with the client's waker, or
// returns nil when there is none (the client is closed, or a Ring).
func (c *Client) subscribe(channel, ticket string, req *request, sharded bool) *waitSub {
	w := c.wakerFor(channel, sharded)
	if w == nil {
		return nil
	}
	return w.Add(channel, ticket, req, req != nil)
}

// waker multiplexes the Client's waiters (internal/wake): a handoff asks
// for a *request and delivers a *Lock.
type waker = wake.Waker[*request, *Lock]

// waitSub is one waiter's registration with a waker.
type waitSub = wake.Sub[*request, *Lock]

// wakerFor returns the waker for channel, creating it on first use (where
// it listens is the mode's choice: one per Client, one per Cluster master
// for sharded channels, a local one in quorum mode); nil when waiters
// poll, and after Close.
func (c *Client) wakerFor(channel string, sharded bool) *waker {
	// In quorum mode a local waker: no node's pub/sub can announce a
	// release of the majority.
	var rdb redis.UniversalClient
	addr, ok := "", true
	if s := c.single; s != nil {
		rdb, addr, ok = s.wakerFor(channel, sharded)
	}
	if !ok {
		return nil
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
	if !o.notify || o.fair || c.sharded(o.sharded) {
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
	if !o.notify || c.sharded(o.sharded) {
		return -1
	}
	w := c.localWaker()
	if w == nil {
		return 1
	}
	n, _ := w.Waiting(k.Wake)
	return n + 1
}

// wakeLocal wakes the longest-waiting caller of this Client for the key of
// l, just released: callers queued behind one another make no attempts of
// their own (waitState.behind), so the lock may carry no mark that makes
// the release publish a wake-up (the release that ends a chain of handoffs).
func (c *Client) wakeLocal(l *Lock) {
	if !l.opts.notify || c.sharded(l.opts.sharded) {
		return
	}
	if w := c.localWaker(); w != nil {
		w.Notify(l.keys.Wake, "")
	}
}
