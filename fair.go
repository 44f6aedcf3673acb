package redislock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
)

// ticket is one fair Obtain call's identity in the queue, shared by all its
// attempts (their tokens differ). See the package guide, Fair locks.
type ticket struct {
	id     string
	queued atomic.Bool // an attempt may have put it in the queue
}

// markQueued notes that an attempt may have put this call's ticket in the
// fair queue, so that the call leaves the queue when it returns.
func (r *request) markQueued() {
	if r.ticket != nil {
		r.ticket.queued.Store(true)
	}
}

// WithFair makes Obtain grant the lock in arrival order (FIFO). Default: off
// (whoever tries first after a release wins). See the package guide (Fair
// locks) and WithQueueTTL for the queue's semantics and cost. Quorum mode
// and ObtainMulti do not support it (an error matching ErrInvalidArgument).
func WithFair(on bool) Option {
	return optionFunc(func(o *options) { o.fair = on })
}

// WithQueueTTL sets, in fair mode, how long a waiter's place in the queue
// survives without the waiter renewing it. Waiters renew it at every attempt
// and wait at most a third of it between attempts; a waiter that died keeps
// the lock from later waiters for at most this long after its last attempt
// (a server clock stepped back meanwhile adds at most the time between two
// attempts). Default 3 s. It must be at least 10 ms.
func WithQueueTTL(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d < minQueueTTL {
			o.fail(invalid("queue TTL %v is below %v", d, minQueueTTL))
			return
		}
		o.queueTTL = d
	})
}

// fairLeave returns what an Obtain call runs when it returns, granted or
// not: in fair mode, if an attempt queued its ticket, take the ticket out of
// the queue (on a detached context, bounded by the release timeout). After
// a grant the ticket is already gone and this changes nothing. nil when not
// in fair mode.
func (c *Client) fairLeave(r *request) func() {
	if r.ticket == nil {
		return nil // and always in quorum mode, which refuses WithFair
	}
	s := c.single
	return func() {
		if r.ticket.queued.Load() {
			leaveQueue(context.Background(), s.c, s.n, r.keys, r.ticket.id, &r.opts)
		}
	}
}

// leaveQueue takes ticket id out of k's fair queue on n, on a detached
// context bounded by the release timeout; ZREM of a ticket not queued
// changes nothing.
func leaveQueue(ctx context.Context, c *Client, n *nodes.Node, k keys.Lock, id string, o *options) {
	_ = c.set.Call(background(ctx), n, o.releaseTimeout, false, "fair leave", func(ctx context.Context, rdb redis.Scripter) error {
		return script.FairLeave(ctx, rdb, k.FairLeave(), id, c.publish(o))
	}, nil)
}
