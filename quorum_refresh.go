package redislock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
)

// refresh extends l on the nodes that hold it and brings the others into
// it (join.lua), so that a grant made on a bare majority (a node was down,
// slow, or went to a contender) does not stay on one, where a single
// node's clock jump or restart would leave a minority: the next refresh
// after a node comes back has it hold the grant too. A join takes a node's
// key only where it is free (never another holder's, never after this
// grant's release there) and keeps the node's last fence when it is
// higher, so the fences of later grants stay ordered.
//
// A node counts towards the refresh's majority when it held the grant
// already (an extension, or a join that found the grant there), or when
// the refresh took it while the lock's validity lasted (its answer came
// before the validity confirmed before the refresh ended) and no attempt
// after the grant's had reached it (join.lua's Joined). Until that
// validity ends a majority holds the grant, so no other client can have
// been granted the lock meanwhile; a node that a later attempt reached
// (JoinedAbove) may have been part of another client's grant, if a clock
// step or a restart broke the majority, and counts from the next refresh
// on. So a refresh never makes ownership look continuous across a gap: a
// refresh that comes after the validity ended counts only extensions, as
// one on a single Redis does. Nodes whose obtain has not answered are
// asked nothing; once the grant is given up (released, lost), a refresh
// only extends and joins nothing.
func (qm *quorumMode) refresh(ctx context.Context, l *Lock, ttl time.Duration) (ok int, errs []error) {
	c, g := qm.c, l.grant
	if g == nil {
		return onGrant(qm, ctx, nil, qm.nodeTimeout(&l.opts, ttl), l.opts.autoPipeline, "refresh", extension{l, ttl.Milliseconds()}, refreshOn, isTrue)
	}
	extend, join := g.forRefresh()
	joining := make([]bool, len(c.nodes))
	ns := nodeList(c, extend)
	for _, i := range join {
		joining[i] = true
		ns = append(ns, c.nodes[i])
	}
	ms, until := ttl.Milliseconds(), l.validUntil()
	return onGrantEach(qm, ctx, ns, qm.nodeTimeout(&l.opts, ttl), l.opts.autoPipeline, "refresh",
		func(ctx context.Context, rdb redis.Scripter, node int) (script.JoinReply, error) {
			if joining[node] {
				return script.Join(ctx, rdb, l.keys.Boxed[:1], l.arg, ms, l.fence, l.opts.holder)
			}
			if held, err := script.Refresh(ctx, rdb, l.keys.Boxed[:1], l.arg, ms); err != nil || !held {
				return script.NotJoined, err
			}
			return script.Extended, nil
		},
		func(r script.JoinReply) bool {
			return r == script.Extended || r == script.Joined && time.Now().Before(until)
		},
		func(ctx context.Context, node int, r script.JoinReply, err error) {
			if !joining[node] {
				if err == nil {
					g.extended(node, r == script.Extended)
				}
				return
			}
			if g.joined(node, joinedState(r, err), !nodes.NotSent(err)) {
				c.releaseOn(ctx, l, c.nodes[node]) // given up while the join was out
			}
		})
}

// nodeList returns the nodes with the indexes is.
func nodeList(c *Client, is []int) []*nodes.Node {
	ns := make([]*nodes.Node, 0, len(c.nodes))
	for _, i := range is {
		ns = append(ns, c.nodes[i])
	}
	return ns
}

// joinedState is the state a join's answer leaves its node in.
func joinedState(r script.JoinReply, err error) nodeState {
	switch {
	case err != nil:
		return nodeUnknown
	case r == script.NotJoined:
		return nodeFree
	}
	return nodeHeld
}

// extension is a refresh of l to ms milliseconds.
type extension struct {
	l  *Lock
	ms int64
}

func refreshOn(ctx context.Context, rdb redis.Scripter, e extension) (bool, error) {
	return script.Refresh(ctx, rdb, e.l.keys.Boxed[:1], e.l.arg, e.ms)
}
