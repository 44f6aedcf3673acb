package redislock

import (
	"context"
	"fmt"
	"time"
)

// Fair (FIFO) locks, WithFair(true).
//
// A fair Obtain that finds the lock held, or free but due to an earlier
// waiter, joins a queue kept on Redis next to the lock ("<prefix>{key}:queue",
// scored by arrival, and ":qexp", each entry's deadline). The lock is
// granted only to the head of the queue (or to anyone while the queue is
// empty), in the same atomic script that checks the queue. A release wakes
// the waiters and names the head, so that the head's client wakes that
// waiter first.
//
// Queue entries expire WithQueueTTL (default 3 s) after their waiter last
// tried; fair waiters therefore try at least every third of it, whatever
// their backoff. A waiter that gives up (ctx ended, retries exhausted)
// leaves the queue at once; one that dies holds up the queue for at most
// the queue TTL after its last attempt.
//
// Cost, compared with the unfair default: every attempt runs a larger script
// (a purge of expired entries, queue reads and writes: O(log n) in the queue
// length plus the expired entries), every release reads the queue head, a
// waiter makes at least one attempt per queue TTL/3 even with a long backoff,
// and the lock stays free between a release and the head's next attempt (a
// wake-up and a round trip) even when another client could have taken it
// at once. Throughput under contention is therefore lower; in exchange no
// waiter is overtaken. Unfair Obtain calls on the same key ignore the queue
// and may overtake it: use one mode per key.

// obtainFair makes one fair attempt; see fair_obtain.lua.
func (c *Client) obtainFair(ctx context.Context, l *Lock, ttl time.Duration) error {
	if c.quorum {
		return invalid("WithFair is not supported in quorum mode")
	}
	start := time.Now()
	ms := ttl.Milliseconds()
	cctx, cancel := context.WithTimeout(ctx, c.nodeTimeout(&l.opts, ttl))
	res, err := fairObtainScript.Run(cctx, c.nodes[0],
		[]string{l.keys.lock, l.keys.fence, l.keys.queue(), l.keys.qexp()},
		l.token, ms, fenceCounterTTL.Milliseconds(), l.opts.queueTTL.Milliseconds(), l.opts.ticket).Int64Slice()
	cancel()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("redislock: unexpected fair_obtain reply %v", res)
	}
	if err != nil {
		c.background(func() { c.releaseAll(l) })
		return &NodeError{Node: 0, Err: err}
	}
	switch res[0] {
	case 1:
		l.fence = res[1]
	case 0:
		if res[1] == -1 {
			return &NodeError{Node: 0, Err: errNoExpiry}
		}
		return heldFor(l.keys, res[1])
	default:
		return &NodeError{Node: 0, Err: fmt.Errorf("redislock: unexpected fair_obtain reply %v", res)}
	}
	until := start.Add(time.Duration(ms)*time.Millisecond - l.opts.drift(ttl))
	if !time.Now().Before(until) {
		c.releaseAll(l)
		return ErrGrantExpired
	}
	l.confirm(until, ttl)
	return nil
}

// fairLeave returns what Obtain runs when it returns: in fair mode, if l was
// not granted, take its entry out of the queue (on a detached context,
// bounded by the release timeout). nil when not in fair mode.
func (c *Client) fairLeave(o *options, l *Lock) func() {
	if !o.fair || c.quorum {
		return nil
	}
	return func() {
		if !l.ValidUntil().IsZero() {
			return // granted: the grant took it out of the queue
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.releaseTimeout)
		defer cancel()
		_ = fairLeaveScript.Run(ctx, c.nodes[0], []string{l.keys.lock, l.keys.wake(), l.keys.queue(), l.keys.qexp()},
			l.opts.ticket, l.opts.publish()).Err()
	}
}
