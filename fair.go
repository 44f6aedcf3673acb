package redislock

import (
	"context"
	"sync/atomic"
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

// markQueued notes that an attempt may have put this call's ticket in the
// fair queue, so that the call leaves the queue when it returns.
func (l *Lock) markQueued() {
	if l.opts.ticket != nil {
		l.opts.ticket.queued.Store(true)
	}
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
	t, publish, timeout := o.ticket, o.publish(false), o.releaseTimeout
	return func() {
		if t == nil || !t.queued.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_ = fairLeaveScript.Run(ctx, c.nodes[0], []string{k.lock, k.wake(), k.queue(), k.qexp()}, t.id, publish).Err()
	}
}
