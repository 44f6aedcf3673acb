package redislock

import (
	"context"
	"time"
)

// Handoff.
//
// When a Lock is released while other callers of the same Client wait,
// notified, for its key, Release passes the lock straight to the one that
// has waited longest: one obtain.lua call releases the grant and grants the
// waiter's fresh token, with its own TTL and the next fence, in one atomic
// step. The waiter gets its Lock without a round trip of its own, and a
// release costs one Redis call per grant instead of a release, a wake-up and
// an attempt. Waiters of other Clients see the lock held throughout; so
// that they are not starved, a chain of handoffs ends after maxHandoffs, and
// that release is an ordinary one that wakes every Client.

// maxHandoffs is how many times in a row a lock is handed over within a
// Client before a Release lets every Client compete for it again.
const maxHandoffs = 16

// handOff passes l to a waiter of this Client, if there is one. It returns
// ok = false when there is none (Release then releases as usual), else
// Release's result for l.
func (c *Client) handOff(l *Lock) (err error, ok bool) {
	if l.handoffs >= maxHandoffs || !l.opts.notify || l.opts.fair || l.opts.sharded || c.quorum {
		return nil, false
	}
	w := c.localWaker()
	if w == nil {
		return nil, false
	}
	s := w.claim(l.keys.wake())
	if s == nil {
		return nil, false
	}
	next := s.req.newLock()
	next.handoffs = l.handoffs + 1
	start := time.Now()
	r := c.callNode(context.Background(), l.opts.releaseTimeout, 0,
		op{kind: opObtain, l: next, ms: s.req.ttl.Milliseconds(), from: l})
	switch {
	case r.err != nil:
		// Unknown outcome: the waiter's token may hold the lock.
		w.deliver(s, nil)
		c.giveBack(next)
		return r.err, true
	case r.a == 1:
		next.fence = r.b
		if next.confirmFrom(&next.opts, start, s.req.ttl) == nil && w.deliver(s, next) {
			break
		}
		w.deliver(s, nil)
		c.giveBack(next)
	default:
		w.deliver(s, nil)
	}
	if r.c != 1 {
		return ErrNotHeld, true
	}
	return nil, true
}

// wakeLocal wakes the longest-waiting caller of this Client for the key of
// l, just released: callers queued behind one another make no attempts of
// their own (waitState.behind), so the lock may carry no mark that makes
// the release publish a wake-up (the release that ends a chain of handoffs).
func (c *Client) wakeLocal(l *Lock) {
	if !l.opts.notify || c.sharded(&l.opts) {
		return
	}
	w := c.localWaker()
	if w != nil {
		w.notify(l.keys.wake(), "")
	}
}

// giveBack releases, in the background, a grant that no caller will use (a
// handoff to a waiter that left, or whose outcome is unknown), and wakes the
// Client's next waiter for the key.
func (c *Client) giveBack(l *Lock) {
	c.background(func() {
		if released, _ := c.releaseAll(l); released > 0 {
			c.wakeLocal(l)
		}
	})
}

// claim picks the longest-waiting caller on channel that can take a handoff
// and is not already taking one, and marks it as taking one.
func (w *waker) claim(channel string) *waitSub {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch := w.chans[channel]; ch != nil {
		for _, s := range ch.waiters {
			if s.req != nil && !s.claimed && s.handed == nil {
				s.claimed = true
				return s
			}
		}
	}
	return nil
}

// deliver ends s's claim and gives it l (nil: the handoff did not grant).
// It reports false when s has left: the caller must release l.
func (w *waker) deliver(s *waitSub, l *Lock) bool {
	w.mu.Lock()
	s.claimed = false
	kept := l != nil && !s.gone
	if kept {
		s.handed = l
	}
	w.mu.Unlock()
	if kept {
		s.signal()
	}
	return kept
}

// take returns the Lock handed to s, if any, while it is still valid; one
// that expired unclaimed is released.
func (s *waitSub) take() *Lock {
	s.w.mu.Lock()
	l := s.handed
	s.handed = nil
	s.w.mu.Unlock()
	if l != nil && !time.Now().Before(l.validUntil()) {
		l.c.giveBack(l)
		return nil
	}
	return l
}
