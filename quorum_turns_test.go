package redislock_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/observe"
)

// The lock survives one minority outage after another. A node stopped
// (SIGSTOP) while the lock is obtained, past the node timeout, grants once
// it resumes, long after the decision: the lock keeps that late grant (or,
// when go-redis gave up on the call before it reached the node, the first
// refresh takes the node).
// Then each node in turn is stopped while the holder refreshes, and each
// refresh succeeds on the two others. (A late grant given back left the
// lock on two nodes, and stopping one of them lost it with two of three
// nodes up.)
func TestQuorumPausedInTurn(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	timedOut := newNodeFailures(2, "obtain")
	c := q.client(t, redislock.WithObserver(timedOut))
	ctx := testkit.Context(t)
	warmUp(t, ctx, c)

	pause(t, q.srvs[2])
	defer q.srvs[2].Resume() // SIGCONT to a running server does nothing
	l, err := c.Obtain(ctx, "turns", 10*time.Second)
	require.NoError(t, err)
	testkit.Recv(t, timedOut.ch, "node 2's obtain to time out")
	q.srvs[2].Resume()
	require.Eventually(t, func() bool { return redislock.NodeSettled(l, 2) }, 10*time.Second, 5*time.Millisecond, "node 2's late answer")
	// Node 2 holds the late grant; or, when go-redis gave up on the call
	// before the request reached the node, nothing (the next refresh
	// takes it). Never the grant's released record.
	switch v := q.rdbs[2].Get(ctx, redislock.LockKey("turns")).Val(); {
	case v == "":
		t.Log("node 2's obtain never ran")
	default:
		require.True(t, strings.HasPrefix(v, l.Token()+":"), "the late grant was given back: %q", v)
	}

	for round := range 6 {
		i := round % 3
		pause(t, q.srvs[i])
		err := l.Refresh(ctx, 10*time.Second)
		q.srvs[i].Resume()
		require.NoError(t, err, "round %d: refresh with node %d stopped", round, i)
	}
	require.NoError(t, l.Release(ctx))
	require.NoError(t, c.Close()) // Release returned at the majority: wait for the rest
	require.Zero(t, q.holders(t, "turns", l.Token()), "Release left the grant behind")
}

// Run's renewals keep the lock through one minority outage after another:
// a node stopped during the Obtain, then each node in turn while fn runs.
func TestQuorumRunPausedInTurn(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	rn, timedOut := newRenewals(), newNodeFailures(2, "obtain")
	c := q.client(t, redislock.WithObserver(rn), redislock.WithObserver(timedOut))
	ctx := testkit.Context(t)
	warmUp(t, ctx, c)

	pause(t, q.srvs[2])
	defer q.srvs[2].Resume() // SIGCONT to a running server does nothing
	err := c.Run(ctx, "run-turns", 3*time.Second, func(ctx context.Context, l *redislock.Lock) error {
		select {
		case <-timedOut.ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		q.srvs[2].Resume()
		for !redislock.NodeSettled(l, 2) { // its late answer, at once
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(time.Millisecond): // no event announces it
			}
		}
		for round := range 6 {
			i := round % 3
			pause(t, q.srvs[i])
			err := renewedTwice(ctx, rn)
			q.srvs[i].Resume()
			if err != nil {
				return fmt.Errorf("round %d, node %d stopped: %w", round, i, err)
			}
		}
		return nil
	}, redislock.WithRefreshInterval(250*time.Millisecond))
	require.NoError(t, err)
}

// pause stops the server (SIGSTOP) and returns once it is stopped: a
// signal takes effect when the process is next scheduled, and a command
// sent before that would still be answered.
func pause(t *testing.T, s *redistest.Server) {
	t.Helper()
	s.Pause()
	stat := fmt.Sprintf("/proc/%d/stat", s.PID())
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(stat)
		if err != nil {
			return true // no procfs: the signal alone
		}
		// pid (comm) state ...: comm may hold spaces, not ") ".
		_, rest, _ := strings.Cut(string(b), ") ")
		return strings.HasPrefix(rest, "T")
	}, 10*time.Second, 5*time.Millisecond, "the server to stop")
}

// nodeFailures is an Observer that closes ch when a call op to node fails.
type nodeFailures struct {
	node int
	op   string
	ch   chan struct{}
	once *sync.Once
}

func newNodeFailures(node int, op string) nodeFailures {
	return nodeFailures{node: node, op: op, ch: make(chan struct{}), once: new(sync.Once)}
}

func (f nodeFailures) NodeFailed(_ context.Context, e observe.NodeEvent) {
	if e.Node == f.node && e.Op == f.op {
		f.once.Do(func() { close(f.ch) })
	}
}

// renewedTwice waits until two renewals got through after it was called
// (the first may have begun before), or one failed, or ctx ended.
func renewedTwice(ctx context.Context, rn renewals) error {
	select {
	case <-rn.ok: // one that may have begun before: not counted
	default:
	}
	for range 2 {
		select {
		case <-rn.ok:
		case <-rn.failed:
			return fmt.Errorf("a renewal failed")
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// A node that was down while the lock was obtained joins the grant at the
// holder's next refresh once it is back, and counts at once (it was free
// since the grant, and the lock still valid): the refresh succeeds with
// another node dead. Release reaches it.
func TestQuorumRefreshJoinsReturningNode(t *testing.T) {
	t.Parallel()
	q := startCutQuorum(t, 3)
	c := q.client(t)
	ctx := testkit.Context(t)
	warmUp(t, ctx, c)

	q.down(2)
	l, err := c.Obtain(ctx, "back", 10*time.Second)
	require.NoError(t, err)
	// Its call failed (at the node timeout) before the node is back.
	require.Eventually(t, func() bool { return redislock.NodeSettled(l, 2) }, 10*time.Second, 5*time.Millisecond, "node 2's call to fail")
	q.up(t, ctx, 2)
	require.Equal(t, 2, q.holders(t, "back", l.Token()))

	q.down(0)
	require.NoError(t, l.Refresh(ctx, 10*time.Second), "refresh on node 1, and node 2 taken")
	require.Equal(t, 3, q.holders(t, "back", l.Token()), "the refresh did not bring node 2 in") // node 0 is only cut off
	require.NoError(t, l.Refresh(ctx, 10*time.Second), "refresh on nodes 1 and 2")
	ttl, err := l.TTL(ctx)
	require.NoError(t, err)
	require.Greater(t, ttl, 5*time.Second)
	q.up(t, ctx, 0)
	require.NoError(t, l.Release(ctx))
	require.NoError(t, c.Close())
	require.Zero(t, q.holders(t, "back", l.Token()))
}

// A refresh never takes a node that holds another grant, and a node it
// takes from a contender's released record keeps the record's higher
// fence: the lock's fence (Inspect) stays its own, and the next grant's is
// above both.
func TestQuorumJoinLeavesOthersAlone(t *testing.T) {
	t.Parallel()
	q := startCutQuorum(t, 3)
	c := q.client(t)
	ctx := testkit.Context(t)
	key := redislock.LockKey("others")

	// Node 2 holds another grant while the lock is obtained on 0 and 1.
	require.NoError(t, q.rdbs[2].Set(ctx, key, "other:1::;", time.Minute).Err())
	l, err := c.Obtain(ctx, "others", 10*time.Second)
	require.NoError(t, err)
	// Node 2 answered "held", and marked the grant (someone waits).
	require.Eventually(t, func() bool { return redislock.NodeSettled(l, 2) }, 10*time.Second, 5*time.Millisecond, "node 2's answer")
	other := q.rdbs[2].Get(ctx, key).Val()
	require.NoError(t, l.Refresh(ctx, 10*time.Second))
	require.Equal(t, other, q.rdbs[2].Get(ctx, key).Val(), "the refresh took another holder's node")

	// The other grant is released with a fence above the lock's (a
	// contender's attempt): the next refresh takes the node, keeping its
	// fence, but does not count it (it may have been part of another
	// client's majority): with node 0 down that refresh has no majority,
	// the one after it has.
	higher := l.Fence() + 1000
	record := fmt.Sprintf("~:%d: otherxxxxxxx", higher)
	require.NoError(t, q.rdbs[2].Set(ctx, key, record, time.Minute).Err())
	q.down(0)
	require.ErrorIs(t, l.Refresh(ctx, 10*time.Second), redislock.ErrNoQuorum)
	// The verdict needs no answer from node 2 (it would not count): the
	// refresh may return before its script there ran.
	taken := fmt.Sprintf("%s:%d: otherxxxxxxx:;", l.Token(), higher)
	require.Eventually(t, func() bool { return q.rdbs[2].Get(ctx, key).Val() == taken }, 10*time.Second, 5*time.Millisecond, "node 2 taken, keeping its fence")
	require.NoError(t, l.Refresh(ctx, 10*time.Second))
	q.up(t, ctx, 0)
	info, err := c.Inspect(ctx, "others")
	require.NoError(t, err)
	require.True(t, info.Held)
	require.Equal(t, l.Fence(), info.Fence)

	require.NoError(t, l.Release(ctx))
	require.NoError(t, c.Close())
	c2 := q.client(t)
	l2, err := c2.Obtain(ctx, "others", 10*time.Second)
	require.NoError(t, err)
	require.Greater(t, l2.Fence(), higher)
	require.NoError(t, l2.Release(ctx))
}

// A refresh that comes after the lock's validity ended counts no node it
// takes back into the grant: after the validity, another client may have
// held the lock and let it go, so only nodes that kept the grant count.
// Here node 2 missed the grant, the validity ends (a drift factor of 0.5
// leaves the keys half their TTL beyond it), node 1 loses the key: the
// refresh extends node 0 and takes node 2, and reports the lock not held.
func TestQuorumLapsedRefreshTakesNothing(t *testing.T) {
	t.Parallel()
	q := startCutQuorum(t, 3)
	c := q.client(t, redislock.WithDriftFactor(0.5))
	ctx := testkit.Context(t)
	warmUp(t, ctx, c)
	q.down(2)
	l, err := c.Obtain(ctx, "lapsed", 4*time.Second)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return redislock.NodeSettled(l, 2) }, 10*time.Second, 5*time.Millisecond, "node 2's call to fail")
	q.up(t, ctx, 2)
	// A sleep: no event marks the end of a validity, which the client
	// measures on the wall clock.
	time.Sleep(time.Until(l.ValidUntil()))
	require.NoError(t, q.rdbs[1].Del(ctx, redislock.LockKey("lapsed")).Err())
	if q.holders(t, "lapsed", l.Token()) != 1 {
		t.Skip("the machine took 2 s: node 0's key expired too")
	}
	require.ErrorIs(t, l.Refresh(ctx, 4*time.Second), redislock.ErrNotHeld)
	require.NoError(t, c.Close()) // the nodes the refresh took are released
	require.Zero(t, q.holders(t, "lapsed", l.Token()))
}

// cutQuorum is nodes that the library reaches through proxies, so that a
// test takes a node off the network (down: its requests never arrive) and
// brings it back (up) without killing it: a killed node's port may be
// taken by another test's server before it is restarted.
type cutQuorum struct {
	*cluster                         // the nodes, with direct clients for checks
	proxies  []*redistest.Proxy      // one per node
	via      []redis.UniversalClient // the library's clients, through the proxies
}

func startCutQuorum(t *testing.T, n int) *cutQuorum {
	t.Helper()
	q := &cutQuorum{cluster: startQuorum(t, n)}
	for _, s := range q.srvs {
		p := redistest.StartProxy(t, s.Addr())
		q.proxies = append(q.proxies, p)
		q.via = append(q.via, s.Client(func(o *redis.Options) {
			o.Addr = p.Addr()
			o.MaxRetries = -1
			o.ContextTimeoutEnabled = true // a call to a node that is down ends at the node timeout
		}))
	}
	return q
}

// client returns a quorum Client on q.via, closed when the test ends.
func (q *cutQuorum) client(t *testing.T, opts ...redislock.ClientOption) *redislock.Client {
	t.Helper()
	c, err := redislock.NewQuorum(q.via, append([]redislock.ClientOption{slackNodeTimeout}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// down takes node i off the network: requests to it are dropped.
func (q *cutQuorum) down(i int) { q.proxies[i].Cut(redistest.Both) }

// up brings node i back and returns once the library's client reaches it
// (the connections open while it was down are closed, and go-redis drops
// them on their next use).
func (q *cutQuorum) up(t *testing.T, ctx context.Context, i int) {
	t.Helper()
	q.proxies[i].Restore()
	require.Eventually(t, func() bool { return q.via[i].Ping(ctx).Err() == nil }, 10*time.Second, 5*time.Millisecond, fmt.Sprintf("node %d back", i))
}

// warmUp opens the client's connections and loads the scripts, on a key
// of its own.
func warmUp(t *testing.T, ctx context.Context, c *redislock.Client) {
	t.Helper()
	// A lease no load outlasts (with the tests' drift factor of 0.5, 1 s
	// left 498 ms for the first calls, which dial and load the scripts).
	l, err := c.Obtain(ctx, "warm", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Refresh(ctx, time.Minute))
	require.NoError(t, l.Release(ctx))
}
