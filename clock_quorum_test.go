package redislock_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
)

// clockQuorum is three real servers under libfaketime: a cluster (its
// client method) whose clocks a test steps.
type clockQuorum struct {
	cluster
	clocks []*redistest.ClockServer
}

func startClockQuorum(t *testing.T) *clockQuorum {
	t.Helper()
	q := &clockQuorum{}
	for range 3 {
		s := redistest.StartClock(t)
		q.clocks = append(q.clocks, s)
		q.srvs = append(q.srvs, s.Server)
		q.rdbs = append(q.rdbs, s.Client(func(o *redis.Options) { o.MaxRetries = -1 }))
	}
	return q
}

// One node's clock jumping forward expires the lock there only: the
// majority still holds it, a contender is refused and the holder refreshes.
// Two nodes' clocks jumping (a majority) hand the lock to the contender
// while the holder's validity lasts (the documented limit), with a higher
// fence; the holder's next Refresh reports the loss.
func TestClockQuorumServerStepForward(t *testing.T) {
	t.Parallel()
	q := startClockQuorum(t)
	ctx := testkit.Context(t)
	a, b := q.client(t), q.client(t)
	la := obtainInValidity(t, ctx, a, "qf", 10*time.Second)
	// Obtain returns at a majority; the third node's grant may still be on
	// its way, and a contender that reached it first would win the node
	// whose clock jumps and that one: wait until all three hold la.
	for i, rdb := range q.rdbs {
		require.Eventually(t, func() bool { return held(ctx, rdb, redislock.LockKey("qf")) }, 10*time.Second, 5*time.Millisecond, fmt.Sprintf("node %d holds the lock", i))
	}

	q.clocks[0].Step(time.Hour)
	_, err := b.Obtain(ctx, "qf", 10*time.Second)
	require.ErrorIs(t, err, redislock.ErrNotObtained, "one node's clock ahead: contender got, want ErrNotObtained")
	require.NoError(t, la.Refresh(ctx, 10*time.Second), "one node's clock ahead: holder's refresh")

	q.clocks[1].Step(time.Hour)
	// The refused attempt's grant on node 0 may still be being released in
	// the background (it answered after the refusal was certain).
	require.Eventually(t, func() bool { return !held(ctx, q.rdbs[0], redislock.LockKey("qf")) }, 10*time.Second, 5*time.Millisecond, "node 0 free")
	lb := obtainInValidity(t, ctx, b, "qf", 10*time.Second)
	if !time.Now().Before(la.ValidUntil()) {
		t.Skip("the machine took 10 s: the first grant's validity ended anyway")
	}
	require.Greater(t, lb.Fence(), la.Fence(), "fence after %d", la.Fence())
	require.ErrorIs(t, la.Refresh(ctx, 10*time.Second), redislock.ErrNotHeld, "stale holder's refresh, want ErrNotHeld")
}

// One node's clock stepped forward past the TTL, on a grant that rests on
// a bare majority (node 2 was down while it was obtained, and no refresh
// has brought it in yet): the node whose clock jumped and node 2 make a
// second majority, and a contender is granted the lock while the first
// holder's validity lasts (the documented exposure). Its fence is higher,
// and the first holder's next Refresh reports the loss. Once a refresh has
// brought node 2 into the grant, the same step is outvoted: the contender
// is refused and the holder refreshes.
func TestClockQuorumStepBareMajority(t *testing.T) {
	t.Parallel()
	q := startClockQuorum(t)
	ctx := testkit.Context(t)
	// The clients reach node 2 through a proxy that takes it off the
	// network (its requests never arrive) and brings it back.
	proxy := redistest.StartProxy(t, q.srvs[2].Addr())
	via := []redis.UniversalClient{q.rdbs[0], q.rdbs[1], q.srvs[2].Client(func(o *redis.Options) {
		o.Addr, o.MaxRetries, o.ContextTimeoutEnabled = proxy.Addr(), -1, true
	})}
	client := func() *redislock.Client {
		c, err := redislock.NewQuorum(via, slackNodeTimeout)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a, b := client(), client()
	// bare obtains key with node 2 down (on nodes 0 and 1), then brings
	// node 2 back, holding nothing.
	bare := func(key string) *redislock.Lock {
		t.Helper()
		proxy.Cut(redistest.Both)
		l := obtainInValidity(t, ctx, a, key, 10*time.Second)
		require.Eventually(t, func() bool { return redislock.NodeSettled(l, 2) }, 10*time.Second, 5*time.Millisecond, "node 2's call to fail")
		proxy.Restore()
		require.Eventually(t, func() bool { return via[2].Ping(ctx).Err() == nil }, 10*time.Second, 5*time.Millisecond, "node 2 back")
		require.Equal(t, 2, q.holders(t, key, l.Token()))
		return l
	}

	la := bare("bare")
	q.clocks[0].Step(time.Hour)
	lb, err := b.Obtain(ctx, "bare", 10*time.Second)
	require.NoError(t, err, "one node's clock step on a bare majority: the contender must win nodes 0 and 2")
	if !time.Now().Before(la.ValidUntil()) {
		t.Skip("the machine took 10 s: the first grant's validity ended anyway")
	}
	require.Greater(t, lb.Fence(), la.Fence())
	require.ErrorIs(t, la.Refresh(ctx, 10*time.Second), redislock.ErrNotHeld)
	require.NoError(t, lb.Release(ctx))

	lc := bare("joined")
	require.NoError(t, lc.Refresh(ctx, 10*time.Second))
	require.Equal(t, 3, q.holders(t, "joined", lc.Token()), "the refresh did not bring node 2 in")
	q.clocks[0].Step(time.Hour)
	_, err = b.Obtain(ctx, "joined", 10*time.Second)
	require.ErrorIs(t, err, redislock.ErrNotObtained, "one node's clock step outvoted")
	require.NoError(t, lc.Refresh(ctx, 10*time.Second))
	require.NoError(t, lc.Release(ctx))
}

// Clocks stepped back on every node keep the lock longer than asked, never
// shorter: the contender is refused, the holder refreshes, and after the
// release the next fence is higher.
func TestClockQuorumServerStepBack(t *testing.T) {
	t.Parallel()
	q := startClockQuorum(t)
	ctx := testkit.Context(t)
	a, b := q.client(t), q.client(t)
	la := obtainInValidity(t, ctx, a, "qb", 2*time.Second)
	for _, s := range q.clocks {
		s.Step(-time.Hour)
	}
	_, err := b.Obtain(ctx, "qb", time.Second)
	require.ErrorIs(t, err, redislock.ErrNotObtained, "contender, want ErrNotObtained")
	require.NoError(t, la.Refresh(ctx, 2*time.Second))
	require.NoError(t, la.Release(ctx))
	lb := obtainInValidity(t, ctx, b, "qb", time.Second)
	require.Greater(t, lb.Fence(), la.Fence(), "fence after %d", la.Fence())
}

// fixedClock is a client wall clock a test sets.
type fixedClock struct{ us atomic.Int64 }

func (c *fixedClock) set(us int64)   { c.us.Store(us) }
func (c *fixedClock) now() time.Time { return time.UnixMicro(c.us.Load()) }
func (c *fixedClock) option() redislock.ClientOption {
	return redislock.WithWallClock(c.now)
}

// Clients whose clocks disagree: while the nodes remember the key (a grant
// or its released record), a client an hour behind still gets a higher
// fence (the nodes answer the last fence, the client proposes above it).
// Once no node remembers the key, a proposal is the client's clock in µs:
// the fence increases exactly when that clock reads later than the key's
// last fence (the README's limit), here shown on both sides of it.
func TestClockQuorumClientSkew(t *testing.T) {
	t.Parallel()
	q := startClockQuorum(t)
	ctx := testkit.Context(t)
	// Records that outlive any pause of a loaded machine; the test forgets
	// them itself (forget), as their expiry would.
	const ttl = 10 * time.Second
	opt := redislock.WithReleaseTimeout(ttl)
	key := redislock.LockKey("skew")
	forget := func() {
		for _, rdb := range q.rdbs {
			require.NoError(t, rdb.Del(ctx, key).Err())
		}
	}
	t0 := time.Now().UnixMicro()
	var ca, cb, cc, cd fixedClock
	ca.set(t0)
	cb.set(t0 - time.Hour.Microseconds())
	a, b := q.client(t, ca.option(), opt), q.client(t, cb.option(), opt)

	la := obtainInValidity(t, ctx, a, "skew", ttl)
	require.Equal(t, t0, la.Fence(), "fence, want the proposer's clock %d", t0)
	require.NoError(t, la.Release(ctx))
	lb := obtainInValidity(t, ctx, b, "skew", ttl) // an hour behind, the record remembers
	require.Greater(t, lb.Fence(), la.Fence(), "clock an hour behind, record alive: fence after %d", la.Fence())
	require.NoError(t, lb.Release(ctx))
	forget()

	// No node remembers the key. A clock that reads the last fence exactly
	// proposes it again: the same fence, not a higher one.
	cc.set(lb.Fence())
	c := q.client(t, cc.option(), opt)
	lc := obtainInValidity(t, ctx, c, "skew", ttl)
	require.Equal(t, lb.Fence(), lc.Fence(), "clock at the last fence: fence, want the same %d", lb.Fence())
	require.NoError(t, lc.Release(ctx))
	forget()
	// One µs later, and the fence is above it.
	cd.set(lc.Fence() + 1)
	d := q.client(t, cd.option(), opt)
	ld := obtainInValidity(t, ctx, d, "skew", ttl)
	require.Greater(t, ld.Fence(), lc.Fence(), "clock 1µs past the last fence: fence after %d", lc.Fence())
	require.NoError(t, ld.Release(ctx))
}
