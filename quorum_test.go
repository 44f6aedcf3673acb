package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
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
			o.DialTimeout = 100 * time.Millisecond
		}))
	}
	return q
}

// slackNodeTimeout keeps the tests' verdicts about the nodes, not about a
// machine loaded by -race and parallel builds.
var slackNodeTimeout = redislock.WithNodeTimeout(time.Second)

func TestQuorumContention(t *testing.T) {
	q := startQuorum(t, 5)
	a, b := q.client(t), q.client(t)
	ctx := ctxT(t, 60*time.Second)
	var mu sync.Mutex
	var inside int
	var fences []int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		c := a
		if w%2 == 1 {
			c = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				l, err := c.Obtain(ctx, "q", 2*time.Second, redislock.WithRetry(redislock.ExponentialBackoff(time.Millisecond, 8*time.Millisecond)), redislock.WithMaxWait(20*time.Second))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				inside++
				if inside != 1 {
					errs <- errors.New("two holders at once")
				}
				fences = append(fences, l.Fence())
				mu.Unlock()
				time.Sleep(100 * time.Microsecond)
				mu.Lock()
				inside--
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(fences) != 200 {
		t.Fatalf("%d grants", len(fences))
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("grant %d: fence %d after %d", i, fences[i], fences[i-1])
		}
	}
}

// A failed attempt releases its minority grants before it returns.
func TestQuorumPartialGrantReleased(t *testing.T) {
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
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := ctxT(t, 10*time.Second)
	old, err := c.Obtain(ctx, "st", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(70 * time.Millisecond)
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
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := ctxT(t, 20*time.Second)
	err := c.Run(ctx, "run", 300*time.Millisecond, func(ctx context.Context, l *redislock.Lock) error {
		time.Sleep(400 * time.Millisecond) // renewed past its TTL
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
		// Every node that holds it has at least the validity left.
		for i, rdb := range q.rdbs {
			if pttl := rdb.PTTL(ctx, redislock.DefaultPrefix+"{v}").Val(); pttl > 0 && pttl < time.Until(l.ValidUntil()) {
				t.Fatalf("node %d PTTL %v below remaining validity %v", i, pttl, time.Until(l.ValidUntil()))
			}
		}
		_ = l.Release(ctx)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	t.Logf("validity min %v max %v", vs[0], vs[len(vs)-1])
}
