package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/require"
)

type cluster struct {
	srvs []*redistest.Server
	rdbs []redis.UniversalClient
}

func (q *cluster) client(t *testing.T, opts ...redislock.ClientOption) *redislock.Client {
	t.Helper()
	c, err := redislock.NewQuorum(q.rdbs, append([]redislock.ClientOption{slackNodeTimeout}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// holders counts the nodes whose lock key holds tok.
func (q *cluster) holders(t *testing.T, key, tok string) int {
	n := 0
	for _, rdb := range q.rdbs {
		v, _ := rdb.Get(context.Background(), redislock.DefaultPrefix+"{"+key+"}").Result()
		if len(v) > len(tok) && v[:len(tok)+1] == tok+":" {
			n++
		}
	}
	return n
}

func startQuorum(t *testing.T, n int) *cluster {
	t.Helper()
	q := &cluster{srvs: redistest.StartN(t, n)}
	for _, s := range q.srvs {
		q.rdbs = append(q.rdbs, s.Client(func(o *redis.Options) {
			o.MaxRetries = -1
			o.DialTimeout = 2 * time.Second // a killed node refuses at once
		}))
	}
	return q
}

// slackNodeTimeout keeps the tests' verdicts about the nodes, not about a
// machine loaded by -race and parallel builds.
var slackNodeTimeout = redislock.WithNodeTimeout(time.Second)

// Two Clients' callers take the lock in turn (exclusion).
func TestQuorumContention(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 5)
	clients := []*redislock.Client{q.client(t), q.client(t)}
	retry := redislock.WithRetry(redislock.ExponentialBackoff(time.Millisecond, 8*time.Millisecond))
	exclusion(t, 8, 25, func(ctx context.Context, n int) (int64, func() error, error) {
		l, err := clients[n%2].Obtain(ctx, "q", 2*time.Second, retry, redislock.WithMaxWait(20*time.Second))
		return obtained(ctx, l, err)
	})
}

// A failed attempt releases its minority grants before it returns.
func TestQuorumPartialGrantReleased(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 5)
	ctx := testkit.Context(t)
	for _, rdb := range q.rdbs[:3] { // someone else holds a majority
		rdb.Set(ctx, redislock.DefaultPrefix+"{part}", "other:1", time.Minute)
	}
	c := q.client(t)
	_, err := c.Obtain(ctx, "part", time.Second)
	require.ErrorIs(t, err, redislock.ErrNotObtained, "Obtain, want ErrNotObtained")
	_ = c.Close()
	for i, rdb := range q.rdbs[3:] {
		require.False(t, held(ctx, rdb, redislock.DefaultPrefix+"{part}"), "node %d still holds the failed attempt's grant", i+3)
	}
}

// A Refresh that finds the majority gone undoes the minority's extension.
func TestQuorumRefreshLostMajority(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := testkit.Context(t)
	l, err := c.Obtain(ctx, "lost", 5*time.Second)
	require.NoError(t, err)
	_ = c.Close() // let a late node's release finish first
	for _, rdb := range q.rdbs[:2] {
		rdb.Del(ctx, redislock.DefaultPrefix+"{lost}")
	}
	require.ErrorIs(t, l.Refresh(ctx, 5*time.Second), redislock.ErrNotHeld, "Refresh, want ErrNotHeld")
	require.Equal(t, 0, q.holders(t, "lost", l.Token()), "minority extension left on nodes")
}

// A Refresh or TTL that only a minority answers is no success: the outcome
// is unknown (ErrNoQuorum), and ValidUntil stays as it was.
func TestQuorumRefreshWithoutMajority(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := testkit.Context(t)
	l, err := c.Obtain(ctx, "minority", 5*time.Second)
	require.NoError(t, err)
	until := l.ValidUntil()
	q.srvs[0].Kill()
	q.srvs[1].Kill()
	require.ErrorIs(t, l.Refresh(ctx, 5*time.Second), redislock.ErrNoQuorum, "Refresh with 2 of 3 down, want ErrNoQuorum")
	got := l.ValidUntil()
	require.True(t, got.Equal(until), "ValidUntil moved from %v to %v without a majority", until, got)
	_, err = l.TTL(ctx)
	require.ErrorIs(t, err, redislock.ErrNoQuorum, "TTL with 2 of 3 down, want ErrNoQuorum")
}

// A stale holder cannot refresh or release a newer quorum grant.
func TestQuorumStaleHolder(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := testkit.Context(t)
	old, err := c.Obtain(ctx, "st", 5*time.Second)
	require.NoError(t, err)
	// Obtain returns at a majority: the third node's grant comes after.
	require.Eventually(t, func() bool { return q.holders(t, "st", old.Token()) == 3 }, 5*time.Second, 5*time.Millisecond, "the grant on every node")
	for _, rdb := range q.rdbs { // its lease ends everywhere, as an expiry would
		rdb.Del(ctx, redislock.LockKey("st"))
	}
	cur, err := c.Obtain(ctx, "st", 5*time.Second)
	require.NoError(t, err)
	c.Close() // wait for the background release of a late node, if any
	held := q.holders(t, "st", cur.Token())
	require.GreaterOrEqual(t, held, 2, "new grant held on of 3 nodes")
	require.ErrorIs(t, old.Refresh(ctx, time.Second), redislock.ErrNotHeld, "stale Refresh")
	require.ErrorIs(t, old.Release(ctx), redislock.ErrNotHeld, "stale Release")
	require.Equal(t, held, q.holders(t, "st", cur.Token()), "new grant held on nodes after stale calls, %d before", held)
	require.Greater(t, cur.Fence(), old.Fence(), "fence not increasing")
	_ = cur.Release(ctx)
}

// Run works unchanged in quorum mode and reports the loss of the majority.
func TestQuorumRun(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := testkit.Context(t)
	err := c.Run(ctx, "run", time.Second, func(ctx context.Context, l *redislock.Lock) error {
		renewedAfter(t, l, l.ValidUntil(), 5*time.Second)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		q.srvs[0].Kill()
		q.srvs[1].Kill()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(3 * time.Second):
			return errors.New("loss of the majority not detected")
		}
	})
	require.ErrorIs(t, err, redislock.ErrLockLost, "Run, want ErrLockLost")
}

// Fences keep increasing when a node restarts empty between grants.
func TestQuorumFencesAfterRestart(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 5)
	ctx := testkit.Context(t)
	var last int64
	for round := range 5 {
		// A fresh client each round: no fence memory on the client side.
		c, err := redislock.NewQuorum(q.rdbs, slackNodeTimeout)
		require.NoError(t, err)
		l, err := c.Obtain(ctx, "r", time.Second, redislock.WithRetry(redislock.LinearBackoff(20*time.Millisecond)))
		require.NoError(t, err)
		require.Greater(t, l.Fence(), last, "round %d: fence after %d", round, last)
		last = l.Fence()
		_ = l.Release(ctx)
		_ = c.Close()
		q.srvs[round].Restart() // one node comes back empty
	}
}

// Fences stay ordered when proposals race on nodes with higher counters.
func TestQuorumFenceReproposal(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	ctx := testkit.Context(t)
	future := time.Now().Add(time.Hour).UnixMicro()
	for _, rdb := range q.rdbs[:2] { // two nodes have seen a fence from a fast clock
		rdb.Set(ctx, redislock.DefaultPrefix+"{p}", fmt.Sprintf("~:%d:", future), time.Hour) // a released record
	}
	c := q.client(t)
	l, err := c.Obtain(ctx, "p", time.Second)
	require.NoError(t, err)
	require.Greater(t, l.Fence(), future, "fence not above the majority's counter %d", future)
	_ = l.Release(ctx)
}

// Validity is positive, below TTL - elapsed, and leaves room for drift.
func TestQuorumValidity(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 5)
	c := q.client(t)
	ctx := testkit.Context(t)
	var vs []time.Duration
	for range 20 {
		start := time.Now()
		l, err := c.Obtain(ctx, "v", time.Second)
		require.NoError(t, err)
		end := time.Now()
		v := l.ValidUntil().Sub(start)
		require.Greater(t, v, time.Duration(0), "validity (request took %v)", end.Sub(start))
		require.False(t, l.ValidUntil().After(end.Add(time.Second-12*time.Millisecond)), "validity %v (request took %v)", v, end.Sub(start))
		vs = append(vs, v)
		// Every node that holds it has at least the validity left. A node
		// may still hold an earlier grant whose release did not get
		// through on a loaded machine: only this grant's token counts.
		for i, rdb := range q.rdbs {
			key := redislock.DefaultPrefix + "{v}"
			pttl := rdb.PTTL(ctx, key).Val()
			if !strings.HasPrefix(rdb.Get(ctx, key).Val(), l.Token()+":") {
				continue
			}
			require.False(t, pttl > 0 && pttl < time.Until(l.ValidUntil()), "node %d PTTL %v below remaining validity %v", i, pttl, time.Until(l.ValidUntil()))
		}
		_ = l.Release(ctx)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	t.Logf("validity min %v max %v", vs[0], vs[len(vs)-1])
}
