package redislock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
)

// grantNodes is what a quorum attempt, and the Lock it makes, knows about
// each node's copy of the grant. It is made before the attempt's calls go
// out, so that every answer, however late, decides its node here:
//
//   - Until the attempt is decided, an answer only records the node's state.
//   - A lost attempt is given up (done): its grants are released.
//   - A won attempt keeps every node that holds its grant: a late grant (its
//     fence and token are the lock's; its TTL began after the request's
//     start, so it outlasts the validity, which never counts it), and a
//     node whose call failed, which may hold it. Nothing of a held lock is
//     released behind its holder's back, so a Refresh may count each node
//     that still holds the grant (see quorumMode.refresh).
//   - Release and a lost Refresh give the grant up (done) and go to every
//     node that may hold it; a node whose obtain or join has not answered
//     is released when it answers, on the goroutine that brings the answer,
//     so that its release cannot reach the node before the grant does.
type grantNodes struct {
	mu      sync.Mutex
	state   []nodeState // guarded by mu: by node
	joining []bool      // guarded by mu: by node, a join in flight (its answer decides the node)
	decided bool        // guarded by mu: the attempt is decided
	done    bool        // guarded by mu: given up (lost attempt, released, lost): answers that may hold it are released
}

// nodeState is what the client knows of one node's copy of a grant.
type nodeState uint8

const (
	nodePending nodeState = iota // the obtain has not answered: its answer decides the node
	nodeHeld                     // holds the grant: granted (in time or late), or joined by a refresh
	nodeUnknown                  // a call failed: it may hold the grant
	nodeFree                     // does not hold the grant: it answered so, or the call was never sent
)

// mayHold reports whether a node in state s may hold the grant.
func (s nodeState) mayHold() bool { return s == nodeHeld || s == nodeUnknown }

func newGrantNodes(n int) *grantNodes {
	return &grantNodes{state: make([]nodeState, n), joining: make([]bool, n)}
}

// obtained is the state an obtain answer leaves its node in: held when it
// granted this proposal, unknown when it failed (it may have granted),
// free when it answered no (a held lock, a low proposal: the script wrote
// nothing) or the call was never sent.
func obtained(rep script.ObtainReply, err error, proposal int64) nodeState {
	switch {
	case nodes.NotSent(err):
		return nodeFree
	case err != nil:
		return nodeUnknown
	case rep.Status == script.Granted && rep.Fence == proposal:
		return nodeHeld
	case rep.Status == script.Granted:
		return nodeUnknown // not this proposal's fence: never sent by this library
	}
	return nodeFree
}

// decide records the attempt's outcome: the nodes that answered in time,
// as held, unknown or free, on a won attempt (keep); a lost one is given
// up, and decide returns the nodes whose answers came in before it on
// other goroutines (late) and may hold the grant: the caller releases
// them, and those of held and unknown.
func (g *grantNodes) decide(keep bool, held, unknown, free []int) (release []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.decided = true
	set := func(ns []int, s nodeState) {
		for _, i := range ns {
			g.state[i] = s
		}
	}
	if keep {
		set(held, nodeHeld)
		set(unknown, nodeUnknown)
		set(free, nodeFree)
		return nil
	}
	g.done = true
	for i, s := range g.state {
		if s.mayHold() {
			release = append(release, i)
			g.state[i] = nodeFree
		}
	}
	// The caller releases held and unknown; the nodes still pending are
	// released when they answer (late).
	set(held, nodeFree)
	set(unknown, nodeFree)
	set(free, nodeFree)
	return release
}

// late records node i's obtain answer that came after the attempt's
// replies were counted (after the decision, or from a call that returned
// after its caller stopped waiting), and
// reports whether the caller must release the node now: the grant was
// given up and the node may hold it.
func (g *grantNodes) late(i int, s nodeState) (release bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state[i] != nodePending {
		return false
	}
	if g.done {
		g.state[i] = nodeFree
		return s.mayHold()
	}
	g.state[i] = s
	return false
}

// forRefresh returns the nodes a refresh asks: those that hold the grant
// (extend), and, while the grant is not given up, those that may not
// (join: they failed, answered no, or lost it), unless a join is already
// in flight there. Nodes whose obtain has not answered are asked neither.
func (g *grantNodes) forRefresh() (extend, join []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, s := range g.state {
		switch {
		case s == nodeHeld:
			extend = append(extend, i)
		case !g.done && (s == nodeUnknown || s == nodeFree) && !g.joining[i]:
			g.joining[i] = true
			join = append(join, i)
		}
	}
	return extend, join
}

// extended records an extension's answer from node i: a node that no
// longer holds the grant is free (a later refresh may join it again).
func (g *grantNodes) extended(i int, held bool) {
	if held {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state[i] == nodeHeld {
		g.state[i] = nodeFree
	}
}

// joined records the answer of a join on node i (s as obtained says, sent
// false when the call never went out), and reports whether the caller must
// release the node now: the grant was given up meanwhile and the node may
// hold it.
func (g *grantNodes) joined(i int, s nodeState, sent bool) (release bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.joining[i] = false
	switch {
	case !g.done && sent:
		g.state[i] = s
	case g.done:
		// Given up while the join was out (Release skipped the node):
		// the answer tells whether the node may hold the grant; without
		// one, what was known before does.
		if sent {
			release = s.mayHold()
		} else {
			release = g.state[i].mayHold()
		}
		g.state[i] = nodeFree
	}
	return release
}

// holding returns the nodes that hold the grant: the ones a TTL asks.
func (g *grantNodes) holding(c *Client) []*nodes.Node {
	if g == nil {
		return c.set.Nodes
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.in(c, func(s nodeState) bool { return s == nodeHeld })
}

// releasing gives the grant up and returns the nodes a release must reach:
// those that hold it or may. A node whose obtain or join has not answered
// is released by its answer's handler (late, joined).
func (g *grantNodes) releasing(c *Client) []*nodes.Node {
	if g == nil {
		return c.set.Nodes
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done = true
	ns := make([]*nodes.Node, 0, len(g.state))
	for i, s := range g.state {
		if s.mayHold() && !g.joining[i] {
			ns = append(ns, c.set.Nodes[i])
		}
	}
	return ns
}

// in returns the nodes whose state is, with g.mu held; not nil (onGrant
// reads nil as every node).
func (g *grantNodes) in(c *Client, is func(nodeState) bool) []*nodes.Node {
	ns := make([]*nodes.Node, 0, len(g.state))
	for i, s := range g.state {
		if is(s) {
			ns = append(ns, c.set.Nodes[i])
		}
	}
	return ns
}

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
	joining := make([]bool, len(c.set.Nodes))
	ns := nodeList(c, extend)
	for _, i := range join {
		joining[i] = true
		ns = append(ns, c.set.Nodes[i])
	}
	ms, until := ttl.Milliseconds(), l.validUntil()
	return nodes.Decide(ctx, &qm.c.set, ns, qm.nodeTimeout(&l.opts, ttl), l.opts.autoPipeline, "refresh",
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
				c.cleanUp(ctx, l, c.set.Nodes[node:node+1]) // given up while the join was out
			}
		})
}

// nodeList returns the nodes with the indexes is.
func nodeList(c *Client, is []int) []*nodes.Node {
	ns := make([]*nodes.Node, 0, len(c.set.Nodes))
	for _, i := range is {
		ns = append(ns, c.set.Nodes[i])
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

// onGrant runs f(ctx, rdb, arg), an operation on a held grant, on the nodes
// ns (nil: every node) and counts the replies for which yes is true,
// collecting the errors (each a *NodeError): in parallel on the live pool,
// returning as soon as the outcome is certain (see decided), every node
// answered, or timeout has passed. Only at the timeout does a node not
// heard from count as timed out. The calls not waited for finish in the
// background on the live pool (Close waits for them); their replies are
// dropped.
func onGrant[T, A any](qm *quorumMode, ctx context.Context, ns []*nodes.Node, timeout time.Duration, pipeline bool, op string,
	arg A, f func(ctx context.Context, rdb redis.Scripter, arg A) (T, error), yes func(T) bool) (ok int, errs []error) {
	return nodes.Decide(ctx, &qm.c.set, ns, timeout, pipeline, op, func(ctx context.Context, rdb redis.Scripter, _ int) (T, error) {
		return f(ctx, rdb, arg)
	}, yes, nil)
}
