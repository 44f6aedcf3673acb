package redislock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
		grant   grantValue
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
		g, err := parseGrant(v)
		if g.marked {
			queued = max(queued, 1)
		}
		return answer{g, time.Duration(pttl) * time.Millisecond, int(queued)}, err
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
		case r.Val.grant.token != "":
			g := grants[r.Val.grant.token]
			if g == nil {
				g = &count{answer: r.Val}
				grants[r.Val.grant.token] = g
			}
			g.n++
			g.pttl = min(g.pttl, r.Val.pttl)
			// A node a refresh brought into the grant keeps its own last
			// fence when that is higher (scripts/join.lua): the grant's
			// fence is the least.
			g.grant.fence = min(g.grant.fence, r.Val.grant.fence)
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
			info.Held, info.Holder, info.Fence, info.TTL = true, g.grant.holder, g.grant.fence, g.pttl
		}
	}
	return info, nil
}

// grantValue is a lock key's grant: "token:fence:rel:holder;", with "*"
// appended when someone waits (see scripts/obtain.lua). A released record
// "~:fence:rel" is no grant: the zero grantValue.
type grantValue struct {
	token  string
	fence  int64
	holder string
	marked bool // an attempt found it held: someone waits
}

func parseGrant(v string) (grantValue, error) {
	bad := fmt.Errorf("redislock: lock key holds %q, not written by redislock", v)
	token, rest, ok := strings.Cut(v, ":")
	fence, rest, ok2 := strings.Cut(rest, ":")
	f, err := strconv.ParseInt(fence, 10, 64)
	switch {
	case !ok || err != nil || token == "":
		return grantValue{}, bad
	case token == releasedToken:
		return grantValue{}, nil
	}
	_, holder, ok3 := strings.Cut(rest, ":")
	holder, marked := strings.CutSuffix(holder, "*")
	holder, ok4 := strings.CutSuffix(holder, ";")
	if !ok2 || !ok3 || !ok4 {
		return grantValue{}, bad
	}
	return grantValue{token: token, fence: f, holder: holder, marked: marked}, nil
}

// releasedToken stands in a released record for the token of a grant.
const releasedToken = "~"
