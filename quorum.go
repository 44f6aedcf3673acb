package redislock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// NewQuorum returns a Client that takes each lock on a majority (N/2+1) of N
// independent Redis masters (the Redlock algorithm), with the same API as
// New. The list may not be empty, hold nil or hold the same client twice.
// Close never closes the clients.
//
// Obtain asks all nodes in parallel, each request bounded by the node timeout
// (WithNodeTimeout; default TTL/10, at least 50 ms), and returns as soon as a
// majority granted, with validity = TTL - elapsed - (TTL * drift factor +
// 2 ms). Nodes that answer later are settled in the background: a late
// grant is kept as part of the lock, and Release first waits for them (at
// most the release timeout) so that its release reaches each node after the
// grant did. Without a valid majority it releases on every node that granted
// or did not answer, then retries or fails: ErrNoQuorum (joined with each
// node's *NodeError) when fewer than a majority of the nodes answered,
// ErrNotObtained (joined with the causes of any failing nodes) when a
// majority answered but other holders denied the grant. Refresh needs a majority and undoes a minority's
// extensions; Release asks every node.
//
// Fences are strictly increasing and unique per key across all grants, under
// these assumptions: two granting majorities share a node, and that node
// still has its fence counter. Each attempt proposes one fence, above the
// client's clock in µs and above every counter it has seen; each node, in the
// same atomic script as the set-if-absent, accepts it only if it is above its
// stored counter and stores it, else answers its counter so the attempt is
// re-proposed higher. A node that restarts empty (no persistence) forgets its
// counters and its locks: while the locks are concerned, two clients may then
// hold a majority at once (a double grant); the fences keep ordering the
// grants as long as no two shared nodes of consecutive majorities lost data.
// Counters expire 24 h after the last grant of their key; proposals are at
// least the client's clock in µs, so an expired counter only matters if a
// client's clock is more than a day behind.
//
// Operational requirement from the Redlock spec: run the nodes with
// `appendonly yes` and `appendfsync always`, or restart a crashed node only
// after the longest TTL in use has passed, so that it cannot grant a lock
// that a majority still holds elsewhere.
func NewQuorum(rdbs []redis.UniversalClient, opts ...Option) (*Client, error) {
	if len(rdbs) == 0 {
		return nil, invalid("no redis clients")
	}
	for i, a := range rdbs {
		if a == nil {
			return nil, invalid("redis client %d is nil", i)
		}
		for j, b := range rdbs[:i] {
			if reflect.TypeOf(a) == reflect.TypeOf(b) && reflect.TypeOf(a).Comparable() && a == b {
				return nil, invalid("redis clients %d and %d are the same client", j, i)
			}
		}
	}
	c := makeClient(append([]redis.UniversalClient(nil), rdbs...))
	c.quorum, c.deadlines = true, true
	for _, rdb := range rdbs {
		c.deadlines = c.deadlines && honoursDeadlines(rdb)
	}
	c.opts.add(opts)
	if err := c.opts.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// reply is one node's answer: the script's one to three integers, or an error
// (a *NodeError).
type reply struct {
	node    int
	a, b, c int64
	err     error
}

// fanout runs o on every node in parallel, each bounded by timeout, and
// returns a channel that receives one reply per node. It is buffered, so the
// senders never wait for a reader that stopped listening; Close waits for
// the senders.
func (c *Client) fanout(ctx context.Context, timeout time.Duration, o op) <-chan reply {
	ch := make(chan reply, len(c.nodes))
	for i := range c.nodes {
		c.background(func() { ch <- c.callNode(ctx, timeout, i, o) })
	}
	return ch
}

func (c *Client) callNode(ctx context.Context, timeout time.Duration, i int, o op) reply {
	if c.deadlines {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	p := &c.pipes[i]
	n := p.inflight.Add(1)
	a, b, r, err := o.run(ctx, c.scripter(&o.l.opts, i, n))
	p.inflight.Add(-1)
	if err != nil {
		err = &NodeError{Node: i, Err: err}
	}
	return reply{node: i, a: a, b: b, c: r, err: err}
}

// gather reads replies from ch until stop (called after each) says so, all n arrived, or
// timeout passed; it does not depend on go-redis honouring the context
// deadline. Nodes that did not answer get a timeout error.
func gather(ch <-chan reply, n int, timeout time.Duration, stop func([]reply) bool) (rs []reply, late int) {
	rs = make([]reply, 0, n)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for len(rs) < n {
		select {
		case r := <-ch:
			rs = append(rs, r)
			if stop(rs) {
				return rs, n - len(rs)
			}
		case <-timer.C:
			return rs, n - len(rs)
		}
	}
	return rs, 0
}

// each runs o on every node (in parallel when there are several) and
// appends their replies to dst; nodes that did not answer within timeout count as
// timed out (their calls finish in the background).
func (c *Client) each(dst []reply, ctx context.Context, timeout time.Duration, o op) []reply {
	if len(c.nodes) == 1 {
		return append(dst, c.callNode(ctx, timeout, 0, o))
	}
	rs, _ := gather(c.fanout(ctx, timeout, o), len(c.nodes), timeout, func([]reply) bool { return false })
	return append(append(dst, rs...), timedOut(rs, len(c.nodes))...)
}

// timedOut returns a timeout reply for each of the n nodes missing from rs.
func timedOut(rs []reply, n int) []reply {
	if len(rs) == n {
		return nil
	}
	answered := make([]bool, n)
	for _, r := range rs {
		answered[r.node] = true
	}
	var out []reply
	for i, ok := range answered {
		if !ok {
			out = append(out, reply{node: i, err: &NodeError{Node: i, Err: context.DeadlineExceeded}})
		}
	}
	return out
}

// tally counts the replies for which held is true and collects the errors.
func tally(rs []reply, held func(reply) bool) (ok int, errs []error) {
	for _, r := range rs {
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case held(r):
			ok++
		}
	}
	return ok, errs
}

func isOne(r reply) bool { return r.a == 1 }

// noteSeen raises the highest fence counter this client has seen.
func (c *Client) noteSeen(f int64) {
	for {
		old := c.seen.Load()
		if f <= old || c.seen.CompareAndSwap(old, f) {
			return
		}
	}
}

// maxProposals bounds how often one attempt re-proposes a higher fence
// after nodes answered with higher counters (racing proposers).
const maxProposals = 3

func (c *Client) obtainQuorum(ctx context.Context, r *request) (*Lock, error) {
	ttl := r.ttl
	ms := ttl.Milliseconds()
	n, q := len(c.nodes), c.majority()
	timeout := c.nodeTimeout(&r.opts, ttl)
	for range maxProposals {
		l := r.newLock()
		proposal := max(time.Now().UnixMicro(), c.seen.Load()+1)
		start := time.Now()
		ch := c.fanout(ctx, timeout, op{kind: opObtain, l: l, ms: ms, proposal: proposal})
		var granted, held, low int
		var errs []error
		var grants, failed []int // nodes to release where the grant is not kept
		rs, late := gather(ch, n, timeout, func(rs []reply) bool {
			r := rs[len(rs)-1]
			switch {
			case r.err != nil:
				errs = append(errs, r.err)
			case r.a == 1 && r.b == proposal:
				granted++
				grants = append(grants, r.node)
				return granted >= q
			case r.a == 0 && r.b == -1:
				errs = append(errs, &NodeError{Node: r.node, Err: errNoExpiry})
			case r.a == 0:
				held++
				return held > n-q // other holders alone deny the majority
			case r.a == -1:
				low++
				c.noteSeen(r.b)
				return false
			default:
				errs = append(errs, &NodeError{Node: r.node, Err: fmt.Errorf("redislock: unexpected obtain reply %d %d", r.a, r.b)})
			}
			failed = append(failed, r.node)
			return false
		})
		var expired error
		if granted >= q {
			l.fence = proposal
			c.noteSeen(proposal)
			expired = l.confirmFrom(&l.opts, start, ttl)
		}
		// Nodes that failed may hold the grant (a lost reply): release them,
		// and settle the late ones, in the background, as they may be slow
		// to answer.
		if late > 0 || len(failed) > 0 {
			keep := granted >= q && expired == nil
			settled := make(chan struct{})
			if keep {
				l.settled = settled
			}
			c.background(func() {
				defer close(settled)
				c.releaseNodes(l, failed)
				c.settleLate(l, ch, late, keep)
			})
		}
		if granted >= q {
			if expired != nil {
				c.releaseNodes(l, grants)
				return nil, expired
			}
			return l, nil
		}
		// No majority: release the nodes that granted before retrying or
		// failing (the failed and late ones are being released above). A node
		// that answered "held" or "fence too low" wrote nothing: the script
		// is atomic and replay-safe.
		c.releaseNodes(l, grants)
		switch {
		case held > n-q:
			return nil, heldFor(r.keys, -1)
		case low > 0 && granted+low+late >= q:
			continue // a higher proposal may win: propose again at once
		}
		for _, r := range timedOut(rs, n) {
			errs = append(errs, r.err)
		}
		if n-len(errs) < q {
			return nil, c.nodesErr(errs) // no majority answered
		}
		// A majority answered, and other holders denied it the grant:
		// contention, with the failing nodes' causes attached.
		return nil, errors.Join(append([]error{ErrNotObtained}, errs...)...)
	}
	return nil, ErrNotObtained
}

// releaseNodes releases the grant on the given nodes in parallel, on the
// background workers as fanout does, and waits, each bounded by the release
// timeout.
func (c *Client) releaseNodes(l *Lock, nodes []int) {
	var wg sync.WaitGroup
	for _, i := range nodes {
		wg.Add(1)
		c.background(func() {
			defer wg.Done()
			c.callNode(context.Background(), l.opts.releaseTimeout, i, op{kind: opRelease, l: l})
		})
	}
	wg.Wait()
}

// awaitLate waits, at most the release timeout, until the nodes that
// answered the grant late are settled, so that a release reaches them after
// their grant did.
func (l *Lock) awaitLate() {
	if l.settled != nil {
		select {
		case <-l.settled:
		case <-time.After(l.opts.releaseTimeout):
		}
	}
}

// settleLate waits for the replies still due after an attempt was decided
// and releases the nodes that failed (they may hold the grant) and, unless
// keep (the attempt won), those that granted late.
func (c *Client) settleLate(l *Lock, ch <-chan reply, late int, keep bool) {
	for range late {
		if r := <-ch; r.err != nil || r.a == 1 && !keep {
			c.callNode(context.Background(), l.opts.releaseTimeout, r.node, op{kind: opRelease, l: l})
		}
	}
}
