package redislock

import (
	"context"
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
	var ns []*nodes.Node
	for i, ok := range g.granted {
		if ok {
			ns = append(ns, c.nodes[i])
		}
	}
	return ns
}

// settleLate is the late handler of a won quorum attempt (nodes.Round.Stop):
// a node that failed may hold the grant and is released in the background;
// a late grant is kept, unless the lock was given up meanwhile.
func (c *Client) settleLate(ctx context.Context, l *Lock, i int, granted, failed, busy bool) {
	if l.grant.answered(i, granted, failed) && !failed {
		c.releaseInBackground(ctx, l, i)
	}
	if failed && !busy { // a refused call never reached the node
		c.releaseInBackground(ctx, l, i)
	}
}

// releaseLost releases a quorum grant found lost (a Refresh without a
// majority) in the background, on every node that granted it, so that a
// minority's extension does not outlive the loss; it does not wait.
func (c *Client) releaseLost(ctx context.Context, l *Lock) {
	for _, n := range l.grant.releasing(c) {
		c.releaseInBackground(ctx, l, n.Index)
	}
}
