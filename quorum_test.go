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
)

type cluster struct {
	srvs []*redistest.Server
	rdbs []redis.UniversalClient
}

func (q *cluster) client(t *testing.T, opts ...redislock.ClientOption) *redislock.Client {
	t.Helper()
	c, err := redislock.NewQuorum(q.rdbs, append([]redislock.ClientOption{slackNodeTimeout}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
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
	ctx := ctxT(t, 10*time.Second)
	for _, rdb := range q.rdbs[:3] { // someone else holds a majority
		rdb.Set(ctx, redislock.DefaultPrefix+"{part}", "other:1", time.Minute)
	}
	c := q.client(t)
	_, err := c.Obtain(ctx, "part", time.Second)
	if !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("Obtain = %v, want ErrNotObtained", err)
	}
	_ = c.Close()
	for i, rdb := range q.rdbs[3:] {
		if held(ctx, rdb, redislock.DefaultPrefix+"{part}") {
			t.Fatalf("node %d still holds the failed attempt's grant", i+3)
		}
	}
}

// A Refresh that finds the majority gone undoes the minority's extension.
func TestQuorumRefreshLostMajority(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := ctxT(t, 10*time.Second)
	l, err := c.Obtain(ctx, "lost", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close() // let a late node's release finish first
	for _, rdb := range q.rdbs[:2] {
		rdb.Del(ctx, redislock.DefaultPrefix+"{lost}")
	}
	if err := l.Refresh(ctx, 5*time.Second); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatalf("Refresh = %v, want ErrNotHeld", err)
	}
	if n := q.holders(t, "lost", l.Token()); n != 0 {
		t.Fatalf("minority extension left on %d nodes", n)
	}
}

// A Refresh or TTL that only a minority answers is no success: the outcome
// is unknown (ErrNoQuorum), and ValidUntil stays as it was.
func TestQuorumRefreshWithoutMajority(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := ctxT(t, 10*time.Second)
	l, err := c.Obtain(ctx, "minority", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	until := l.ValidUntil()
	q.srvs[0].Kill()
	q.srvs[1].Kill()
	if err := l.Refresh(ctx, 5*time.Second); !errors.Is(err, redislock.ErrNoQuorum) {
		t.Fatalf("Refresh with 2 of 3 down = %v, want ErrNoQuorum", err)
	}
	if got := l.ValidUntil(); !got.Equal(until) {
		t.Fatalf("ValidUntil moved from %v to %v without a majority", until, got)
	}
	if _, err := l.TTL(ctx); !errors.Is(err, redislock.ErrNoQuorum) {
		t.Fatalf("TTL with 2 of 3 down = %v, want ErrNoQuorum", err)
	}
}

// A stale holder cannot refresh or release a newer quorum grant.
func TestQuorumStaleHolder(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := ctxT(t, 10*time.Second)
	old, err := c.Obtain(ctx, "st", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Obtain returns at a majority: the third node's grant comes after.
	eventually(t, 5*time.Second, "the grant on every node", func() bool { return q.holders(t, "st", old.Token()) == 3 })
	for _, rdb := range q.rdbs { // its lease ends everywhere, as an expiry would
		rdb.Del(ctx, redislock.LockKey("st"))
	}
	cur, err := c.Obtain(ctx, "st", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close() // wait for the background release of a late node, if any
	held := q.holders(t, "st", cur.Token())
	if held < 2 {
		t.Fatalf("new grant held on %d of 3 nodes", held)
	}
	if err := old.Refresh(ctx, time.Second); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatalf("stale Refresh = %+v", err)
	}
	if err := old.Release(ctx); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatalf("stale Release = %v", err)
	}
	if n := q.holders(t, "st", cur.Token()); n != held {
		t.Fatalf("new grant held on %d nodes after stale calls, %d before", n, held)
	}
	if cur.Fence() <= old.Fence() {
		t.Fatal("fence not increasing")
	}
	_ = cur.Release(ctx)
}

// Run works unchanged in quorum mode and reports the loss of the majority.
func TestQuorumRun(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := ctxT(t, 20*time.Second)
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
	if !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("Run = %v, want ErrLockLost", err)
	}
}

// Fences keep increasing when a node restarts empty between grants.
func TestQuorumFencesAfterRestart(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 5)
	ctx := ctxT(t, 30*time.Second)
	var last int64
	for round := range 5 {
		// A fresh client each round: no fence memory on the client side.
		c, err := redislock.NewQuorum(q.rdbs, slackNodeTimeout)
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Obtain(ctx, "r", time.Second, redislock.WithRetry(redislock.LinearBackoff(20*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		if l.Fence() <= last {
			t.Fatalf("round %d: fence %d after %d", round, l.Fence(), last)
		}
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
	ctx := ctxT(t, 10*time.Second)
	future := time.Now().Add(time.Hour).UnixMicro()
	for _, rdb := range q.rdbs[:2] { // two nodes have seen a fence from a fast clock
		rdb.Set(ctx, redislock.DefaultPrefix+"{p}", fmt.Sprintf("~:%d:", future), time.Hour) // a released record
	}
	c := q.client(t)
	l, err := c.Obtain(ctx, "p", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() <= future {
		t.Fatalf("fence %d not above the majority's counter %d", l.Fence(), future)
	}
	_ = l.Release(ctx)
}

// Validity is positive, below TTL - elapsed, and leaves room for drift.
func TestQuorumValidity(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 5)
	c := q.client(t)
	ctx := ctxT(t, 10*time.Second)
	var vs []time.Duration
	for range 20 {
		start := time.Now()
		l, err := c.Obtain(ctx, "v", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		end := time.Now()
		v := l.ValidUntil().Sub(start)
		if v <= 0 || l.ValidUntil().After(end.Add(time.Second-12*time.Millisecond)) {
			t.Fatalf("validity %v (request took %v)", v, end.Sub(start))
		}
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
			if pttl > 0 && pttl < time.Until(l.ValidUntil()) {
				t.Fatalf("node %d PTTL %v below remaining validity %v", i, pttl, time.Until(l.ValidUntil()))
			}
		}
		_ = l.Release(ctx)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	t.Logf("validity min %v max %v", vs[0], vs[len(vs)-1])
}
