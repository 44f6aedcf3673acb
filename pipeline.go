package redislock

import (
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Auto-pipelining.
//
// Each call to Redis costs a write and a read system call on both sides,
// and on a busy machine those, not Redis, bound the throughput. While more
// than autoPipelineAbove calls of a Client are in flight to one node,
// further calls go through go-redis' AutoPipeliner for that node (a
// *redis.Client only), which sends the calls waiting at that moment as one
// pipeline. Below that, calls go straight to the client, so a lone caller
// never waits for a batch to fill. The threshold is measured (see README,
// Performance): a lower one slows hot-key handoffs, which need a single call
// each, and at 1 to 8 callers batching only adds latency.
const autoPipelineAbove = 16

// pipe is one node's auto-pipelining state.
type pipe struct {
	inflight atomic.Int32
	once     sync.Once
	ap       redis.Scripter // nil: the node is not a *redis.Client, or go-redis refused
}

// scripter returns where a call to node i goes while n calls (this one
// included) are in flight to it.
func (c *Client) scripter(o *options, i int, n int32) redis.Scripter {
	if n > autoPipelineAbove && o.autoPipeline {
		p := &c.pipes[i]
		p.once.Do(func() {
			if rdb, ok := c.nodes[i].(*redis.Client); ok {
				// Cached by go-redis and closed with rdb; the first
				// caller's configuration wins.
				if ap, err := rdb.AutoPipeline(); err == nil {
					p.ap = ap
				}
			}
		})
		if p.ap != nil {
			return p.ap
		}
	}
	return c.nodes[i]
}
