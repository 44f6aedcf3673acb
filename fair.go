package redislock

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

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

// fairLeave returns what an Obtain call runs when it returns, granted or
// not: in fair mode, if an attempt queued its ticket, take the ticket out of
// the queue (on a detached context, bounded by the release timeout). After
// a grant the ticket is already gone and this changes nothing. nil when not
// in fair mode.
func (c *Client) fairLeave(r *request) func() {
	if r.ticket == nil {
		return nil
	}
	return func() {
		if !r.ticket.queued.Load() {
			return
		}
		_ = c.call(background(context.Background()), c.nodes[0], r.opts.releaseTimeout, false, "fair leave", func(ctx context.Context, rdb redis.Scripter) error {
			return script.FairLeave(ctx, rdb, r.keys.FairLeave(), r.ticket.id, r.opts.publish(false))
		}, nil)
	}
}
