package redislock

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
)

// quorumMode is the mode of a Client on N independent masters
// (NewQuorum): every operation goes to the nodes in parallel on the live
// pool and is decided by a majority; see the package guide (Quorum mode).
// It has no pub/sub (a local waker queues the Client's own callers), no
// handoffs, fair queues, replicas, multi-key locks or batched renewal.
type quorumMode struct {
	c    *Client
	now  func() time.Time // the wall clock fences are proposed from
	seen atomic.Int64     // highest fence seen on any node
}

var _ mode = (*quorumMode)(nil)

func (qm *quorumMode) check(o *options) error {
	switch {
	case o.replicas > 0:
		return invalid("WithReplicas is not supported in quorum mode")
	case o.fair:
		return invalid("WithFair is not supported in quorum mode")
	}
	return nil
}

func (qm *quorumMode) nodeTimeout(o *options, ttl time.Duration) time.Duration {
	if o.nodeTimeout > 0 {
		return o.nodeTimeout
	}
	return min(max(ttl/10, 50*time.Millisecond), ttl-o.drift(ttl))
}

func (qm *quorumMode) ttl(ctx context.Context, l *Lock) (least int64, ok int, errs []error) {
	least = -1
	ok, errs = onGrant(qm, ctx, l.grant.holding(qm.c), qm.nodeTimeout(&l.opts, l.currentTTL()), l.opts.autoPipeline, "ttl", l, ttlOn, func(p pttl) bool {
		if p.held && (least < 0 || p.ms < least) {
			least = p.ms
		}
		return p.held
	})
	return least, ok, errs
}

// pttl is a lock's remaining TTL on one node, if the grant holds it there.
type pttl struct {
	ms   int64
	held bool
}

func ttlOn(ctx context.Context, rdb redis.Scripter, l *Lock) (pttl, error) {
	ms, held, err := script.TTL(ctx, rdb, l.keys.Boxed[:1], l.arg)
	return pttl{ms, held}, err
}

// release goes to the nodes that hold l or may, deciding at the majority
// (see onGrant and grantNodes); ctx must be detached from the caller's
// cancellation.
func (qm *quorumMode) release(ctx context.Context, l *Lock) (ok int, errs []error) {
	return onGrant(qm, ctx, l.grant.releasing(qm.c), l.opts.releaseTimeout, l.opts.autoPipeline, "release", l, func(ctx context.Context, rdb redis.Scripter, l *Lock) (bool, error) {
		r := releaseCall{l: l}
		err := r.Run(ctx, rdb)
		return r.released, err
	}, isTrue)
}

func isTrue(b bool) bool { return b }

// lost releases a grant found lost (a Refresh without a majority), or
// confirmed too late, in the background on every node that granted it, so
// that a minority's extension does not outlive the loss; it does not wait.
func (qm *quorumMode) lost(ctx context.Context, l *Lock, _ bool) {
	qm.c.cleanUp(ctx, l, l.grant.releasing(qm.c))
}

// maxProposals bounds how often one attempt re-proposes a higher fence
// after nodes answered with higher counters (racing proposers).
const maxProposals = 3

// obtain makes one attempt on a majority of the nodes. It proposes a
// fence above the client's clock in µs and every counter it has seen, sends
// it to every node at once, and decides as soon as the replies make the
// outcome certain: granted by a majority, denied by other holders, or
// proposed too low (then it proposes again at once, higher). Nodes that
// answer after the decision are dealt with in the background (grantNodes): a
// won lock keeps a late grant, and a node that failed, which may hold it;
// a lost attempt releases them.
func (qm *quorumMode) obtain(ctx context.Context, r request) (*Lock, error) {
	c := qm.c
	n, q := len(c.set.Nodes), c.set.Majority()
	timeout := qm.nodeTimeout(&r.opts, r.ttl)
	var top int64 // the highest fence the nodes named for this key
	for range maxProposals {
		l := r.newLock()
		g := newGrantNodes(n)
		l.grant = g
		proposal := max(qm.now().UnixMicro(), above(qm.seen.Load()), above(top))
		l.start = time.Now()
		round := nodes.Fan(ctx, &c.set, c.set.Nodes, timeout, l.opts.autoPipeline, "obtain", func(ctx context.Context, rdb redis.Scripter, _ int) (script.ObtainReply, error) {
			return script.Obtain{Keys: l.keys.Boxed[:1], Token: l.arg, TTL: l.ttlArg, Proposal: proposal,
				Holder: l.opts.holder}.Run(ctx, rdb)
		}, func(ctx context.Context, node int, rep script.ObtainReply, err error) { // a late call, once it returned
			if g.late(node, obtained(rep, err, proposal)) {
				c.cleanedUp(ctx, l.key, node, c.releaseOn(ctx, l, c.set.Nodes[node]))
			}
		})
		v := votes{qm: qm, ctx: ctx, n: n, q: q, proposal: proposal, pttl: -1}
		_, missing := round.Gather(timeout, v.count)

		won := v.granted >= q
		var expired error
		if won {
			l.fence = proposal
			qm.noteSeen(proposal)
			expired = l.confirmFrom(&l.opts, l.start, r.ttl)
		}
		keep := won && expired == nil
		early := g.decide(keep, v.grants, v.failed, v.free)
		round.Stop(func(rep nodes.Reply[script.ObtainReply]) {
			if nodes.IsLate(rep.Err) {
				return // its onLate tells g
			}
			if g.late(rep.Node, obtained(rep.Val, rep.Err, proposal)) {
				c.cleanUp(ctx, l, c.set.Nodes[rep.Node:rep.Node+1])
			}
		})
		if keep {
			return l, nil
		}
		// Not won: release the nodes that granted before retrying or
		// failing, and in the background those that may have. A node that
		// answered "held" or "fence too low" wrote nothing: the script is
		// atomic and replay-safe.
		if len(v.grants) > 0 {
			round := nodes.Fanout(c.set.Live, nodeList(c, v.grants), func(n *nodes.Node) (struct{}, error) {
				return struct{}{}, c.releaseOn(ctx, l, n)
			})
			round.Gather(l.opts.releaseTimeout, nil)
			round.Stop(nil)
		}
		c.cleanUp(ctx, l, nodeList(c, append(v.failed, early...))) // a lost reply may hide a grant
		switch {
		case expired != nil:
			return nil, expired
		case v.held > n-q:
			return nil, heldFor(r.keys, v.pttl)
		case v.exhausted > n-q:
			return nil, errNoFenceLeft
		case v.low > 0 && v.granted+v.low+len(missing) >= q:
			top = max(top, v.top)
			continue // a higher proposal may win: propose again at once
		}
		errs := append(v.errs, nodes.TimedOut[script.ObtainReply](ctx, &c.set, missing, "obtain")...)
		var nodeErrs []error
		for _, e := range errs {
			nodeErrs = append(nodeErrs, e.Err)
		}
		if n-len(nodeErrs) < q {
			return nil, qm.c.failed(ErrNoQuorum, nodeErrs) // no majority answered
		}
		// A majority answered, and other holders denied it the grant:
		// contention, with the failing nodes' causes attached.
		return nil, &QuorumError{Err: ErrNotObtained, Nodes: nodeErrs}
	}
	return nil, ErrNotObtained
}

// votes counts the replies of one quorum attempt as they arrive.
type votes struct {
	qm       *quorumMode
	ctx      context.Context
	n, q     int
	proposal int64

	granted, held, low int
	exhausted          int                               // nodes whose last fence is the highest int64
	top                int64                             // the highest other last fence of the nodes that answered "proposal too low"
	pttl               int64                             // the longest remaining lease of the nodes that answered "held"
	grants, failed     []int                             // nodes that granted; nodes that failed
	free               []int                             // nodes that wrote nothing: answered no, or never sent
	errs               []nodes.Reply[script.ObtainReply] // the failed nodes' replies
}

// count adds one reply and reports whether the attempt is decided.
func (v *votes) count(rep nodes.Reply[script.ObtainReply]) bool {
	switch r := rep.Val; {
	case nodes.NoOutcome(rep.Err): // never sent, or its onLate tells g
		if nodes.NotSent(rep.Err) {
			v.free = append(v.free, rep.Node)
		}
		v.errs = append(v.errs, nodes.Reply[script.ObtainReply]{Node: rep.Node, Err: nodes.ReplyErr(v.ctx, &v.qm.c.set, rep, "obtain")})
		return false
	case rep.Err != nil:
	case r.Status == script.Granted && r.Fence == v.proposal:
		v.granted++
		v.grants = append(v.grants, rep.Node)
		return v.granted >= v.q
	case r.Status == script.Held && r.PTTL == script.NoExpiry:
		rep.Err = v.qm.c.nodeErr(v.ctx, rep.Node, "obtain", errNoExpiry)
	case r.Status == script.Held:
		v.held++
		v.free = append(v.free, rep.Node)
		v.pttl = max(v.pttl, r.PTTL)
		return v.held > v.n-v.q // other holders alone deny the majority
	case r.Status == script.LowProposal:
		v.low++
		v.free = append(v.free, rep.Node)
		if r.Counter == math.MaxInt64 {
			v.exhausted++
		} else {
			v.top = max(v.top, r.Counter)
		}
		v.qm.noteSeen(r.Counter)
		return false
	default:
		rep.Err = v.qm.c.nodeErr(v.ctx, rep.Node, "obtain", errUnexpected)
	}
	v.failed = append(v.failed, rep.Node)
	v.errs = append(v.errs, rep)
	return false
}

// errNoFenceLeft is the error of a key whose last fence is the highest
// int64: no grant can have a fence above it (obtain.lua says the same).
var errNoFenceLeft = errors.New("redislock: no fence is left on this key: its last fence is 9223372036854775807")

// above is the least proposal above fence f, 0 for none: the client's
// highest fence seen may be another key's last.
func above(f int64) int64 {
	if f == math.MaxInt64 {
		return 0
	}
	return f + 1
}

// noteSeen raises the highest fence counter this client has seen.
func (qm *quorumMode) noteSeen(f int64) {
	for {
		old := qm.seen.Load()
		if f <= old || qm.seen.CompareAndSwap(old, f) {
			return
		}
	}
}

// withWallClock sets the wall clock that quorum mode proposes fences from
// (default time.Now): a test seam for clients whose clocks disagree. It
// never bears on validity, which runs on Go's monotonic clock.
func withWallClock(now func() time.Time) ClientOption {
	return clientOptionFunc(func(c *config) {
		if now != nil {
			c.wallClock = now
		}
	})
}
