package redislock

import (
	"context"
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
// (WithNodeTimeout; default TTL/10, at least 5 ms), and returns as soon as a
// majority granted, with validity = TTL - elapsed - (TTL * drift factor +
// 2 ms). Nodes that grant later are released in the background (Close waits
// for that). Without a valid majority it releases on every node that granted
// or did not answer, then retries or fails: ErrNotObtained when other holders
// alone deny the majority, ErrNoQuorum (joined with each node's *NodeError)
// when failing nodes do. Refresh needs a majority and undoes a minority's
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
	c := &Client{nodes: append([]redis.UniversalClient(nil), rdbs...), quorum: true, opts: defaultOptions()}
	c.opts.add(opts)
	if err := c.opts.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// reply is one node's answer: the script's one or two integers, or an error
// (a *NodeError).
type reply struct {
	node int
	a, b int64
	err  error
}

type nodeCall func(ctx context.Context, rdb redis.UniversalClient) (a, b int64, err error)

// fanout runs call on every node in parallel, each bounded by timeout, and
// returns a channel that receives one reply per node. It is buffered, so the
// senders never wait for a reader that stopped listening; Close waits for
// the senders.
func (c *Client) fanout(ctx context.Context, timeout time.Duration, call nodeCall) <-chan reply {
	ch := make(chan reply, len(c.nodes))
	for i := range c.nodes {
		c.background(func() { ch <- c.callNode(ctx, timeout, i, call) })
	}
	return ch
}

func (c *Client) callNode(ctx context.Context, timeout time.Duration, i int, call nodeCall) reply {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	a, b, err := call(ctx, c.nodes[i])
	if err != nil {
		err = &NodeError{Node: i, Err: err}
	}
	return reply{node: i, a: a, b: b, err: err}
}

// gather reads replies from ch until stop says so, all n arrived, or
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

// each runs call on every node (in parallel when there are several) and
// returns their replies; nodes that did not answer within timeout count as
// timed out (their calls finish in the background).
func (c *Client) each(ctx context.Context, timeout time.Duration, call nodeCall) []reply {
	if len(c.nodes) == 1 {
		return []reply{c.callNode(ctx, timeout, 0, call)}
	}
	rs, late := gather(c.fanout(ctx, timeout, call), len(c.nodes), timeout, func([]reply) bool { return false })
	for range late {
		rs = append(rs, reply{node: -1, err: &NodeError{Node: -1, Err: context.DeadlineExceeded}})
	}
	return rs
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

func (c *Client) obtainQuorum(ctx context.Context, l *Lock, ttl time.Duration) error {
	ms := ttl.Milliseconds()
	n, q := len(c.nodes), c.majority()
	timeout := c.nodeTimeout(&l.opts, ttl)
	for range maxProposals {
		proposal := max(time.Now().UnixMicro(), c.seen.Load()+1)
		start := time.Now()
		ch := c.fanout(ctx, timeout, func(ctx context.Context, rdb redis.UniversalClient) (int64, int64, error) {
			res, err := obtainScript.Run(ctx, rdb, []string{l.keys.lock, l.keys.fence},
				l.token, ms, proposal, fenceCounterTTL.Milliseconds()).Int64Slice()
			if err == nil && len(res) != 2 {
				err = fmt.Errorf("redislock: unexpected obtain reply %v", res)
			}
			return at(res, 0), at(res, 1), err
		})
		var granted, held, low int
		var errs []error
		var grants, failed []int // nodes to release where the grant is not kept
		_, late := gather(ch, n, timeout, func(rs []reply) bool {
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
		// Nodes that failed or answer late may hold the grant (a lost reply):
		// release them in the background, as they may be slow to answer.
		if late > 0 || len(failed) > 0 {
			c.background(func() {
				c.releaseNodes(l, failed)
				c.releaseLate(l, ch, late)
			})
		}
		if granted >= q {
			l.fence = proposal
			c.noteSeen(proposal)
			until := start.Add(time.Duration(ms)*time.Millisecond - l.opts.drift(ttl))
			if time.Now().Before(until) {
				l.confirm(until, ttl)
				return nil
			}
			c.releaseNodes(l, grants)
			return ErrGrantExpired
		}
		// No majority: release the nodes that granted before retrying or
		// failing (the failed and late ones are being released above). A node
		// that answered "held" or "fence too low" wrote nothing: the script
		// is atomic and replay-safe.
		c.releaseNodes(l, grants)
		switch {
		case held > n-q:
			return ErrNotObtained
		case low > 0 && granted+low+late >= q:
			continue // a higher proposal may win: propose again at once
		case len(errs)+late > 0:
			for range late {
				errs = append(errs, &NodeError{Node: -1, Err: context.DeadlineExceeded})
			}
			return c.nodesErr(errs)
		}
		return ErrNotObtained
	}
	return ErrNotObtained
}

func at(s []int64, i int) int64 {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// releaseNodes releases the grant on the given nodes in parallel and waits,
// each bounded by the release timeout.
func (c *Client) releaseNodes(l *Lock, nodes []int) {
	var wg sync.WaitGroup
	for _, i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.callNode(context.Background(), l.opts.releaseTimeout, i, l.releaseOn)
		}()
	}
	wg.Wait()
}

// releaseLate waits for the replies still due after an attempt was decided
// and releases the nodes that granted late or failed.
func (c *Client) releaseLate(l *Lock, ch <-chan reply, late int) {
	for range late {
		if r := <-ch; r.err != nil || r.a == 1 {
			c.callNode(context.Background(), l.opts.releaseTimeout, r.node, l.releaseOn)
		}
	}
}
