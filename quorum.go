package redislock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
)

// maxProposals bounds how often one attempt re-proposes a higher fence
// after nodes answered with higher counters (racing proposers).
const maxProposals = 3

// obtainQuorum makes one attempt on a majority of the nodes. It proposes a
// fence above the client's clock in µs and every counter it has seen, sends
// it to every node at once, and decides as soon as the replies make the
// outcome certain: granted by a majority, denied by other holders, or
// proposed too low (then it proposes again at once, higher). Nodes that
// answer after the decision are settled in the background: a late grant is
// kept as part of a lock that was won, released otherwise; a node that
// failed may hold the grant, and is released.
func (c *Client) obtainQuorum(ctx context.Context, r *request) (*Lock, error) {
	n, q := len(c.nodes), c.majority()
	timeout := c.nodeTimeout(&r.opts, r.ttl)
	for range maxProposals {
		l := r.newLock()
		proposal := max(time.Now().UnixMicro(), c.seen.Load()+1)
		l.start = time.Now()
		round := fanout(c, ctx, timeout, l.opts.autoPipeline, "obtain", func(ctx context.Context, rdb redis.Scripter) (script.ObtainReply, error) {
			return script.Obtain{Keys: l.keys.Boxed[:1], Token: l.arg, TTL: l.ttlArg, Proposal: proposal,
				Holder: l.opts.holder}.Run(ctx, rdb)
		}, func(ctx context.Context, node int) { c.releaseOnNode(ctx, l, node) }) // an abandoned call, once it returned
		v := votes{c: c, ctx: ctx, n: n, q: q, proposal: proposal, pttl: -1}
		_, missing := round.Gather(timeout, v.count)

		won := v.granted >= q
		var expired error
		if won {
			l.fence = proposal
			c.noteSeen(proposal)
			expired = l.confirmFrom(&l.opts, l.start, r.ttl)
		}
		keep := won && expired == nil
		if keep {
			l.grant = newGrantNodes(n, v.grants, missing)
		}
		round.Stop(func(rep nodes.Reply[script.ObtainReply]) {
			granted := rep.Err == nil && rep.Val.Status == script.Granted
			settled := settledElsewhere(rep.Err)
			switch {
			case keep:
				c.settleLate(ctx, l, rep.Node, granted, rep.Err != nil, settled)
			case granted || rep.Err != nil && !settled:
				c.releaseInBackground(ctx, l, rep.Node)
			}
		})
		for _, i := range v.failed {
			c.releaseInBackground(ctx, l, i) // a lost reply may hide a grant
		}
		if keep {
			return l, nil
		}
		// Not won: release the nodes that granted before retrying or
		// failing. A node that answered "held" or "fence too low" wrote
		// nothing: the script is atomic and replay-safe.
		c.releaseNodes(ctx, l, v.grants)
		switch {
		case expired != nil:
			return nil, expired
		case v.held > n-q:
			return nil, heldFor(r.keys, v.pttl)
		case v.low > 0 && v.granted+v.low+len(missing) >= q:
			continue // a higher proposal may win: propose again at once
		}
		errs := append(v.errs, timedOut[script.ObtainReply](c, ctx, missing, "obtain")...)
		var nodeErrs []error
		for _, e := range errs {
			nodeErrs = append(nodeErrs, e.Err)
		}
		if n-len(nodeErrs) < q {
			return nil, c.nodesErr(ErrNoQuorum, nodeErrs) // no majority answered
		}
		// A majority answered, and other holders denied it the grant:
		// contention, with the failing nodes' causes attached.
		return nil, &QuorumError{Err: ErrNotObtained, Nodes: nodeErrs}
	}
	return nil, ErrNotObtained
}

// votes counts the replies of one quorum attempt as they arrive.
type votes struct {
	c        *Client
	ctx      context.Context
	n, q     int
	proposal int64

	granted, held, low int
	pttl               int64                             // the longest remaining lease of the nodes that answered "held"
	grants, failed     []int                             // nodes that granted; nodes that failed
	errs               []nodes.Reply[script.ObtainReply] // the failed nodes' replies
}

// count adds one reply and reports whether the attempt is decided.
func (v *votes) count(rep nodes.Reply[script.ObtainReply]) bool {
	switch r := rep.Val; {
	case settledElsewhere(rep.Err): // never sent, or released when it returns
		v.errs = append(v.errs, nodes.Reply[script.ObtainReply]{Node: rep.Node, Err: asNodeErr(v.c, v.ctx, rep, "obtain")})
		return false
	case rep.Err != nil:
	case r.Status == script.Granted && r.Fence == v.proposal:
		v.granted++
		v.grants = append(v.grants, rep.Node)
		return v.granted >= v.q
	case r.Status == script.Held && r.PTTL == script.NoExpiry:
		rep.Err = v.c.nodeErr(v.ctx, rep.Node, "obtain", errNoExpiry)
	case r.Status == script.Held:
		v.held++
		v.pttl = max(v.pttl, r.PTTL)
		return v.held > v.n-v.q // other holders alone deny the majority
	case r.Status == script.LowProposal:
		v.low++
		v.c.noteSeen(r.Counter)
		return false
	default:
		rep.Err = v.c.nodeErr(v.ctx, rep.Node, "obtain", errUnexpected)
	}
	v.failed = append(v.failed, rep.Node)
	v.errs = append(v.errs, rep)
	return false
}

// settledElsewhere reports whether a node's failed obtain call needs no
// release from the caller: it never went out (nodes.NotSent), or it was
// abandoned, and the settle of its fan-out releases it once it returns.
func settledElsewhere(err error) bool { return nodes.NotSent(err) || nodes.IsAbandoned(err) }

// noteSeen raises the highest fence counter this client has seen.
func (c *Client) noteSeen(f int64) {
	for {
		old := c.seen.Load()
		if f <= old || c.seen.CompareAndSwap(old, f) {
			return
		}
	}
}

// releaseNodes releases the grant on the given nodes in parallel and waits,
// each bounded by the release timeout.
func (c *Client) releaseNodes(ctx context.Context, l *Lock, which []int) {
	if len(which) == 0 {
		return
	}
	ns := make([]*nodes.Node, len(which))
	for i, j := range which {
		ns[i] = c.nodes[j]
	}
	ctx = background(ctx)
	round := nodes.Fanout(c.live, ns, func(n *nodes.Node) (bool, error) {
		var released bool
		err := c.call(ctx, n, l.opts.releaseTimeout, false, "release", func(ctx context.Context, rdb redis.Scripter) (err error) {
			released, err = releaseOn(ctx, rdb, l)
			return err
		}, nil)
		if err != nil {
			return false, err // released may still be written (abandoned)
		}
		return released, nil
	})
	round.Gather(l.opts.releaseTimeout, nil)
	round.Stop(nil)
}
