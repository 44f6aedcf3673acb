package redislock_test

import (
	"context"
	"errors"
	"fmt"
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

func TestQuorumMinorityDown(t *testing.T) {
	q := startQuorum(t, 5)
	c := q.client(t)
	ctx := ctxT(t, 20*time.Second)
	q.srvs[0].Kill()
	q.srvs[1].Kill()
	l, err := c.Obtain(ctx, "m", time.Second)
	if err != nil {
		t.Fatalf("Obtain with 2 of 5 down: %v", err)
	}
	if n := q.holders(t, "m", l.Token()); n != 3 {
		t.Fatalf("held on %d nodes", n)
	}
	if err := l.Refresh(ctx, 2*time.Second); err != nil {
		t.Fatalf("Refresh with 2 of 5 down: %v", err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl <= time.Second {
		t.Fatalf("TTL = %v, %v", ttl, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release with 2 of 5 down: %v", err)
	}
	if n := q.holders(t, "m", l.Token()); n != 0 {
		t.Fatalf("still held on %d nodes", n)
	}
	// A third node down: no majority, an error of its own.
	q.srvs[2].Kill()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Obtain(short, "m", time.Second, redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)))
	if !errors.Is(err, redislock.ErrNoQuorum) || errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("Obtain with 3 of 5 down = %v, want ErrNoQuorum", err)
	}
	var ne *redislock.NodeError
	if !errors.As(err, &ne) {
		t.Fatalf("no per-node detail in %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("Obtain outlived its ctx")
	}
}

// A stalled node does not hold up the grant; its late grant is kept as part
// of the lock, and Release releases it.
func TestQuorumStalledNode(t *testing.T) {
	q := startQuorum(t, 5)
	// A node timeout far above the test's own deadline: an Obtain that
	// waited for the stalled node would not return before the test fails,
	// and the late reply arrives in time however loaded the machine (one
	// that timed out would be released).
	var patient []redis.UniversalClient // calls wait for a stopped node
	for _, s := range q.srvs {
		patient = append(patient, s.Client(func(o *redis.Options) { o.ReadTimeout = time.Minute }))
	}
	c, err := redislock.NewQuorum(patient, redislock.WithNodeTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t, 20*time.Second)
	if _, err := c.Obtain(ctx, "warm", time.Second); err != nil { // connections up
		t.Fatal(err)
	}
	q.srvs[4].Pause()
	// Obtain returns while the node is still stopped: an Obtain that waited
	// for it would wait until the node is resumed, after this.
	got := make(chan *redislock.Lock, 1)
	go func() {
		l, err := c.Obtain(ctx, "s", 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	var l *redislock.Lock
	select {
	case l = <-got:
	case <-time.After(10 * time.Second):
		q.srvs[4].Resume()
		t.Fatal("the grant waited for the stopped node")
	}
	if l == nil {
		return
	}
	q.srvs[4].Resume()
	eventually(t, 5*time.Second, "the late grant", func() bool { return q.holders(t, "s", l.Token()) == 5 })
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.Close() // Release returned at the majority: wait for the rest
	if n := q.holders(t, "s", l.Token()); n != 0 {
		t.Fatalf("Release left the grant on %d nodes", n)
	}
}

// Release does not wait for a node whose grant has not answered, and its
// release does not run there before the grant (a slow node may run the two
// in either order and leave the grant behind): that node is released once
// its grant answers.
func TestQuorumLateGrantAfterRelease(t *testing.T) {
	q := startQuorum(t, 5)
	// Node 4 holds the obtain script (1 key; the release has 3) of key
	// "lr" until the test lets it go.
	hold := make(chan struct{})
	q.rdbs[4].AddHook(holdHook{hold: hold, key: redislock.DefaultPrefix + "{lr}"})
	c, err := redislock.NewQuorum(q.rdbs, slackNodeTimeout)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 20*time.Second)
	l, err := c.Obtain(ctx, "lr", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Release returns while node 4's grant is still held back.
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	close(hold) // the grant runs on node 4, then its release
	_ = c.Close()
	if n := q.holders(t, "lr", l.Token()); n != 0 {
		t.Fatalf("the grant is left on %d nodes", n)
	}
}

// holdHook delays the obtain script calls of key until hold is closed.
type holdHook struct {
	hold chan struct{}
	key  string
}

func (holdHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h holdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 3 && fmt.Sprint(a[2]) == "1" && a[3] == h.key {
			select {
			case <-h.hold:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	}
}

func (holdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestQuorumLocalQueue: in quorum mode, callers of one Client queue for a
// key: only the longest-waiting one makes attempts, however short the
// others' backoff, and a Release by the Client wakes it at once, so they
// are granted in arrival order.
func TestQuorumLocalQueue(t *testing.T) {
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := ctxT(t, 30*time.Second)
	held, err := c.Obtain(ctx, "lq", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Obtain returns at a majority: wait until the third node ran its
	// grant too, so that it is not counted below as a waiter's attempt.
	eventually(t, 5*time.Second, "the grant on every node", func() bool { return q.holders(t, "lq", held.Token()) == 3 })
	calls := func() int { return evalCalls(q.rdbs[0].(*redis.Client)) }
	before := calls()
	const waiters = 8
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			// The first waiter's backoff outlasts the test: only the
			// release's wake-up gets it the lock in time. The others
			// would poll often, were they not queued behind it.
			retry := redislock.LinearBackoff(5 * time.Millisecond)
			if i == 0 {
				retry = redislock.LinearBackoff(time.Minute)
			}
			l, err := c.Obtain(ctx, "lq", time.Minute, redislock.WithRetry(retry))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		})
		eventually(t, 5*time.Second, "the waiter queued", func() bool {
			n, _ := redislock.LocalWaiters(c, "lq")
			return n == i+1
		})
	}
	time.Sleep(100 * time.Millisecond)
	if n := calls() - before; n != 1 {
		t.Fatalf("%d attempts on node 0 while %d callers waited, want 1 (the first one's): waiters behind it made attempts", n, waiters)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(order) != waiters {
		t.Fatalf("%d of %d waiters granted", len(order), waiters)
	}
	for i, w := range order {
		if w != i {
			t.Fatalf("grant order %v, want arrival order", order)
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

// A failing node does not turn contention into ErrNoQuorum: with a majority
// answering and others holding the lock, Obtain reports contention (and
// retries), with the failing node's cause attached.
func TestQuorumContentionWithAFailedNode(t *testing.T) {
	q := startQuorum(t, 5)
	ctx := ctxT(t, 10*time.Second)
	for _, rdb := range q.rdbs[:2] {
		rdb.Set(ctx, redislock.DefaultPrefix+"{mixed}", "other:1", time.Minute)
	}
	q.srvs[4].Kill()
	c := q.client(t)
	_, err := c.Obtain(ctx, "mixed", time.Second, redislock.WithRetry(redislock.LimitRetry(redislock.LinearBackoff(time.Millisecond), 2)))
	var ne *redislock.NodeError
	if !errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, redislock.ErrNoQuorum) || !errors.As(err, &ne) || ne.Node != 4 {
		t.Fatalf("Obtain = %v, want ErrNotObtained with node 4's error", err)
	}
}
