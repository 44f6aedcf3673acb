package redislock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// Inspect reports who holds key, as Redis sees it now: whether it is held,
// the holder identity its grant recorded (WithHolder), its fence and its
// remaining TTL. The token is never reported. In quorum mode the lock counts
// as held when a majority of the nodes hold the same grant; TTL is then the
// least over them. An unreachable Redis, or fewer than a majority of the
// nodes answering, is an error.
func (c *Client) Inspect(ctx context.Context, key string) (lease.Info, error) {
	o, err := c.callOptions(nil)
	if err != nil {
		return lease.Info{}, err
	}
	if err := lease.CheckKey(key); err != nil {
		return lease.Info{}, err
	}
	k := makeKeys(o.prefix, key)
	type answer struct {
		grant grantValue
		pttl  time.Duration
		err   error
	}
	answers := make(chan answer, len(c.nodes))
	for i, rdb := range c.nodes {
		c.background(func() {
			cctx, cancel := context.WithTimeout(ctx, o.releaseTimeout)
			defer cancel()
			res, err := inspectScript.Run(cctx, rdb, []string{k.lock}).Slice()
			a := answer{err: err}
			if err == nil {
				a.grant, a.pttl, a.err = parseInspect(res)
			}
			if a.err != nil {
				a.err = &NodeError{Node: i, Err: a.err}
			}
			answers <- a
		})
	}
	type tally struct {
		grant grantValue
		n     int
		ttl   time.Duration // the least over the nodes
	}
	grants := make(map[string]*tally)
	var errs []error
	for range c.nodes {
		a := <-answers
		switch {
		case a.err != nil:
			errs = append(errs, a.err)
		case a.grant.token != "":
			g := grants[a.grant.token]
			if g == nil {
				g = &tally{grant: a.grant, ttl: a.pttl}
				grants[a.grant.token] = g
			}
			g.n++
			g.ttl = min(g.ttl, a.pttl)
		}
	}
	if len(c.nodes)-len(errs) < c.majority() {
		return lease.Info{}, c.nodesErr(errs)
	}
	info := lease.Info{Key: key}
	for _, g := range grants {
		if g.n >= c.majority() {
			info.Held, info.Holder, info.Fence, info.TTL = true, g.grant.holder, g.grant.fence, g.ttl
		}
	}
	return info, nil
}

// grantValue is a lock key's value: "token:fence" or "token:fence:holder;",
// with "*" appended when someone waits (see obtain.lua).
type grantValue struct {
	token  string
	fence  int64
	holder string
}

func parseGrant(v string) (grantValue, error) {
	v = strings.TrimSuffix(v, "*")
	token, rest, ok := strings.Cut(v, ":")
	fence, holder, hasHolder := strings.Cut(rest, ":")
	if hasHolder {
		holder, ok = strings.CutSuffix(holder, ";")
	}
	f, err := strconv.ParseInt(fence, 10, 64)
	if !ok || err != nil || token == "" {
		return grantValue{}, fmt.Errorf("redislock: lock key holds %q, not written by redislock", v)
	}
	return grantValue{token: token, fence: f, holder: holder}, nil
}

// parseInspect reads inspect.lua's reply.
func parseInspect(res []any) (grantValue, time.Duration, error) {
	if len(res) == 1 {
		return grantValue{}, 0, nil // no such key
	}
	pttl, ok1 := res[0].(int64)
	v, ok2 := res[1].(string)
	if len(res) != 2 || !ok1 || !ok2 {
		return grantValue{}, 0, fmt.Errorf("redislock: unexpected inspect reply %v", res)
	}
	if pttl < 0 {
		return grantValue{}, 0, errNoExpiry
	}
	g, err := parseGrant(v)
	return g, time.Duration(pttl) * time.Millisecond, err
}
