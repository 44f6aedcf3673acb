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
)

// Inspect reports who holds key, as Redis sees it now: whether it is held,
// the holder identity its grant recorded (WithHolder), its fence and its
// remaining TTL. The token is never reported. In quorum mode the lock counts
// as held when a majority of the nodes hold the same grant; TTL is then the
// least over them. An unreachable Redis, or fewer than a majority of the
// nodes answering, is an error; so is a lock key that redislock did not
// write.
func (c *Client) Inspect(ctx context.Context, key string) (lease.Info, error) {
	o, err := c.callOptions(nil)
	if err != nil {
		return lease.Info{}, err
	}
	if err := lease.CheckKey(key); err != nil {
		return lease.Info{}, err
	}
	k := keys.New(o.prefix, key)
	type answer struct {
		grant grantValue
		pttl  time.Duration
	}
	var buf [1]nodes.Reply[answer]
	rs := onNodes(c, buf[:0], ctx, o.releaseTimeout, false, "inspect", k.Pair[:1], func(ctx context.Context, rdb redis.Scripter, key []string) (answer, error) {
		v, pttl, exists, err := script.Inspect(ctx, rdb, key)
		if err != nil || !exists {
			return answer{}, err
		}
		if pttl == script.NoExpiry {
			return answer{}, errNoExpiry
		}
		g, err := parseGrant(v)
		return answer{g, time.Duration(pttl) * time.Millisecond}, err
	})
	type count struct {
		answer
		n int
	}
	grants := make(map[string]*count)
	var errs []error
	for _, r := range rs {
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
		}
	}
	if len(c.nodes)-len(errs) < c.majority() {
		return lease.Info{}, c.nodesErr(ErrNoQuorum, errs)
	}
	info := lease.Info{Key: key}
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
	holder, ok4 := strings.CutSuffix(strings.TrimSuffix(holder, "*"), ";")
	if !ok2 || !ok3 || !ok4 {
		return grantValue{}, bad
	}
	return grantValue{token: token, fence: f, holder: holder}, nil
}

// releasedToken stands in a released record for the token of a grant.
const releasedToken = "~"
