package redislock

import (
	"context"
	"fmt"
	"sync/atomic"
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

// ticket is one fair Obtain call's identity in the queue, shared by all its
// attempts (their tokens may differ).
type ticket struct {
	id     string
	queued atomic.Bool // an attempt put it in the queue
}

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
		l.token, ms, fenceCounterTTL.Milliseconds(), l.opts.queueTTL.Milliseconds(), l.opts.ticket.id).Int64Slice()
	cancel()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("redislock: unexpected fair_obtain reply %v", res)
	}
	if err != nil {
		l.opts.ticket.queued.Store(true) // it may have been queued
		c.background(func() { c.releaseAll(l) })
		return &NodeError{Node: 0, Err: err}
	}
	switch res[0] {
	case 1:
		l.fence = res[1]
	case 0:
		l.opts.ticket.queued.Store(true)
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

// fairLeave returns what an Obtain call runs when it returns, granted or
// not: in fair mode, if an attempt queued its ticket, take the ticket out of
// the queue (on a detached context, bounded by the release timeout). After
// a grant the ticket is already gone and this changes nothing. nil when not
// in fair mode.
func (c *Client) fairLeave(o *options, k keys) func() {
	if !o.fair || c.quorum {
		return nil
	}
	t, publish, timeout := o.ticket, o.publish(), o.releaseTimeout
	return func() {
		if t == nil || !t.queued.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_ = fairLeaveScript.Run(ctx, c.nodes[0], []string{k.lock, k.wake(), k.queue(), k.qexp()}, t.id, publish).Err()
	}
}
