package redislock

import (
	"sync"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
)

// grantNodes is what a quorum attempt, and the Lock it makes, knows about
// each node's copy of the grant. It is made before the attempt's calls go
// out, so that every answer, however late, settles its node here:
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
	joining []bool      // guarded by mu: by node, a join in flight (its answer settles the node)
	decided bool        // guarded by mu: the attempt is decided
	done    bool        // guarded by mu: given up (lost attempt, released, lost): answers that may hold it are released
}

// nodeState is what the client knows of one node's copy of a grant.
type nodeState uint8

const (
	nodePending nodeState = iota // the obtain has not answered: its answer settles the node
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
// other goroutines (settled) and may hold the grant: the caller releases
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
	// released when they answer (settled).
	set(held, nodeFree)
	set(unknown, nodeFree)
	set(free, nodeFree)
	return release
}

// settled records node i's obtain answer that came after the attempt's
// replies were counted (late, or an abandoned call once it returned), and
// reports whether the caller must release the node now: the grant was
// given up and the node may hold it.
func (g *grantNodes) settled(i int, s nodeState) (release bool) {
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
		return c.nodes
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.in(c, func(s nodeState) bool { return s == nodeHeld })
}

// releasing gives the grant up and returns the nodes a release must reach:
// those that hold it or may. A node whose obtain or join has not answered
// is released by its answer's handler (settled, joined).
func (g *grantNodes) releasing(c *Client) []*nodes.Node {
	if g == nil {
		return c.nodes
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done = true
	ns := make([]*nodes.Node, 0, len(g.state))
	for i, s := range g.state {
		if s.mayHold() && !g.joining[i] {
			ns = append(ns, c.nodes[i])
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
			ns = append(ns, c.nodes[i])
		}
	}
	return ns
}
