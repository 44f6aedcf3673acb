package redislock

import (
	"sync"

	"github.com/redislock-go/redislock/internal/nodes"
)

// grantNodes is what a quorum Lock knows about the nodes its grant reached:
// which granted, and which had not answered when Obtain returned at the
// majority. Release and a lost Refresh act on the nodes that granted and
// never wait for the others: a node that grants after the lock was given up
// is released when its answer arrives, on the goroutine that brings it, so
// that its release cannot reach the node before its grant does.
type grantNodes struct {
	mu      sync.Mutex
	granted []bool // guarded by mu: by node, answered granted
	pending []bool // guarded by mu: by node, not answered yet
	done    bool   // guarded by mu: released or lost; late grants are released at once
}

// newGrantNodes records a won attempt: the nodes that granted before the
// decision, and those not heard from (missing).
func newGrantNodes(n int, granted, missing []int) *grantNodes {
	g := &grantNodes{granted: make([]bool, n), pending: make([]bool, n)}
	for _, i := range granted {
		g.granted[i] = true
	}
	for _, i := range missing {
		g.pending[i] = true
	}
	return g
}

// answered records node i's late reply to the grant and reports whether it
// must be released now: it granted (or may have: failed) after the lock was
// given up.
func (g *grantNodes) answered(i int, granted, failed bool) (release bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending[i] = false
	if granted {
		g.granted[i] = true
	}
	return (granted || failed) && g.done
}

// holding returns the nodes that granted l and that its client has not
// released: the only ones a Refresh or TTL may count towards a majority.
// A node whose obtain failed, or answered only after it had timed out, is
// released in the background, and it may have granted all the same (the
// request arrived, the reply did not): until that release lands it holds
// the grant, and a Refresh that counted it would have a majority that
// vanishes when the release arrives, while its caller believes the lock
// valid. Such a node is never asked (its grant is not extended either).
func (g *grantNodes) holding(c *Client) []*nodes.Node {
	if g == nil {
		return c.nodes
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.grantedNodes(c)
}

// releasing marks the grant given up and returns the nodes that granted it:
// those a release must reach. A node that has not answered is released by
// answered's caller when it does.
func (g *grantNodes) releasing(c *Client) []*nodes.Node {
	if g == nil {
		return c.nodes
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done = true
	return g.grantedNodes(c)
}

// grantedNodes returns the nodes that granted, with g.mu held; not nil
// (onGrant reads nil as every node).
func (g *grantNodes) grantedNodes(c *Client) []*nodes.Node {
	ns := make([]*nodes.Node, 0, len(g.granted))
	for i, ok := range g.granted {
		if ok {
			ns = append(ns, c.nodes[i])
		}
	}
	return ns
}
