package redislock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
)

// maxHandoffs is how many times in a row a lock is handed over within a
// Client before a Release lets every Client compete for it again: waiters
// of other Clients see the lock held throughout a chain of handoffs.
const maxHandoffs = 16

// handOff passes l to the longest-waiting caller of this Client for its key,
// if there is one (single mode, notified, not fair, not sharded): one
// obtain.lua call releases l and grants the waiter's fresh token, with its
// own TTL and the next fence, in one atomic step. It reports handed = false
// when there is no such waiter (Release then releases as usual), else
// Release's result for l.
func (c *Client) handOff(ctx context.Context, l *Lock) (handed bool, err error) {
	if l.handoffs >= maxHandoffs || !l.opts.notify || l.opts.fair || l.opts.sharded || c.quorum {
		return false, nil
	}
	w := c.localWaker()
	if w == nil {
		return false, nil
	}
	s, req := w.Claim(l.keys.Wake)
	if s == nil {
		return false, nil
	}
	next := req.newLock()
	next.handoffs = l.handoffs + 1
	next.start = time.Now()
	var rep script.ObtainReply
	err = c.call(ctx, c.nodes[0], l.opts.releaseTimeout, l.opts.autoPipeline, "handoff", func(ctx context.Context, rdb redis.Scripter) (err error) {
		rep, err = script.Obtain{Keys: l.keys.Boxed[:1], Token: next.arg, TTL: next.ttlArg,
			Holder: next.opts.holder, From: l.arg}.Run(ctx, rdb)
		return err
	}, func(ctx context.Context, _ error) { c.releaseNow(ctx, next, noObserver) })
	switch {
	case err != nil:
		// Unknown outcome: the waiter's token may hold the lock (given
		// back by the settle above once an abandoned call returns).
		w.Deliver(s, nil, false)
		if !nodes.IsAbandoned(err) && !nodes.NotSent(err) {
			c.giveBack(ctx, next)
		}
		return true, err
	case rep.Status == script.Granted:
		next.fence = rep.Fence
		if next.confirmFrom(&next.opts, next.start, req.ttl) != nil || !w.Deliver(s, next, true) {
			w.Deliver(s, nil, false)
			c.giveBack(ctx, next)
		}
	default:
		w.Deliver(s, nil, false)
	}
	if !rep.Released {
		return true, ErrNotHeld
	}
	return true, nil
}

// wakeLocal wakes the longest-waiting caller of this Client for the key of
// l, just released: callers queued behind one another make no attempts of
// their own (waitState.behind), so the lock may carry no mark that makes
// the release publish a wake-up (the release that ends a chain of handoffs).
func (c *Client) wakeLocal(l *Lock) {
	if !l.opts.notify || c.sharded(&l.opts) {
		return
	}
	if w := c.localWaker(); w != nil {
		w.Notify(l.keys.Wake, "")
	}
}

// giveBack releases, in the background, a grant that no caller will use (a
// handoff to a waiter that left, or whose outcome is unknown), and wakes the
// Client's next waiter for the key.
func (c *Client) giveBack(ctx context.Context, l *Lock) { c.releaseLater(ctx, l, noObserver) }

// releaseNow is releaseLater's release, on the caller's goroutine (a
// settle, which runs on the goroutine of the call it settles); ctx must be
// detached.
func (c *Client) releaseNow(ctx context.Context, l *Lock, done func(error)) {
	released, errs := c.releaseAll(ctx, l)
	if released > 0 {
		c.wakeLocal(l)
	}
	for _, err := range errs {
		c.cleanupFailed(ctx, l, 0, err)
	}
	done(c.verdict(released, errs))
}

// releaseLater releases l in the background, as giveBack does, and then
// calls done with the release's outcome (as Release returns it); with
// ErrBusy wrapped when the clean-up pool refused the call.
func (c *Client) releaseLater(ctx context.Context, l *Lock, done func(error)) {
	ctx = background(ctx)
	n := c.nodes[0]
	if !n.Background(c.cleanup, func() { c.releaseNow(ctx, l, done) }) {
		err := c.nodeErr(ctx, 0, "release", nodes.ErrBusy)
		c.cleanupFailed(ctx, l, 0, err)
		done(err)
	}
}
