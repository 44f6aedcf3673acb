package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
)

// Inspect reports who holds key, as Redis sees it now: whether it is held,
// the holder identity its grant recorded (WithHolder), its fence and its
// remaining TTL, and how many callers wait for it as far as Redis and this
// Client know (Waiters: a lower bound; see lease.Info). The token is never
// reported. In quorum mode the lock counts
// as held when a majority of the nodes hold the same grant; TTL is then the
// least over them. An unreachable Redis, or fewer than a majority of the
// nodes answering, is an error; so is a lock key that redislock did not
// write.
func (c *Client) Inspect(ctx context.Context, key string) (lease.Info, error) {
	o, err := c.callOptions(nil)
	if err != nil {
		return lease.Info{}, err
	}
	if err := backend.CheckKey(key); err != nil {
		return lease.Info{}, err
	}
	k := keys.New(o.prefix, key)
	type answer struct {
		grant   script.Value
		pttl    time.Duration
		waiters int // the fair queue's size, at least 1 when the grant is marked
	}
	var buf [1]nodes.Reply[answer]
	rs := onNodes(c, buf[:0], ctx, o.releaseTimeout, false, "inspect", []string{k.Lock, k.Queue()}, func(ctx context.Context, rdb redis.Scripter, ks []string) (answer, error) {
		v, pttl, exists, queued, err := script.Inspect(ctx, rdb, ks)
		if err != nil || !exists {
			return answer{waiters: int(queued)}, err
		}
		if pttl == script.NoExpiry {
			return answer{}, errNoExpiry
		}
		g, ok := script.ParseValue(v)
		if !ok {
			return answer{}, fmt.Errorf("redislock: lock key holds %q, not written by redislock", v)
		}
		if g.Marked {
			queued = max(queued, 1)
		}
		return answer{g, time.Duration(pttl) * time.Millisecond, int(queued)}, nil
	})
	type count struct {
		answer
		n int
	}
	grants := make(map[string]*count)
	var errs []error
	info := lease.Info{Key: key}
	for _, r := range rs {
		if r.Err == nil {
			info.Waiters = max(info.Waiters, r.Val.waiters)
		}
		switch {
		case r.Err != nil:
			errs = append(errs, r.Err)
		case r.Val.grant.Token != "":
			g := grants[r.Val.grant.Token]
			if g == nil {
				g = &count{answer: r.Val}
				grants[r.Val.grant.Token] = g
			}
			g.n++
			g.pttl = min(g.pttl, r.Val.pttl)
			// A node a refresh brought into the grant keeps its own last
			// fence when that is higher (scripts/join.lua): the grant's
			// fence is the least.
			g.grant.Fence = min(g.grant.Fence, r.Val.grant.Fence)
		}
	}
	if len(c.nodes)-len(errs) < c.majority() {
		return lease.Info{}, c.m.failed(ErrNoQuorum, errs)
	}
	if o.notify && !c.m.sharded(o.sharded) {
		if w := c.localWaker(); w != nil {
			n, _ := w.Waiting(k.Wake) // this Client's own waiters
			info.Waiters = max(info.Waiters, n)
		}
	}
	for _, g := range grants {
		if g.n >= c.majority() {
			info.Held, info.Holder, info.Fence, info.TTL = true, g.grant.Holder, g.grant.Fence, g.pttl
		}
	}
	return info, nil
}
