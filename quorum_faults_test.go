package redislock_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuorumMinorityDown(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 5)
	c := q.client(t)
	ctx := testkit.Context(t)
	q.srvs[0].Kill()
	q.srvs[1].Kill()
	l, err := c.Obtain(ctx, "m", 10*time.Second)
	require.NoError(t, err, "Obtain with 2 of 5 down")
	require.Equal(t, 3, q.holders(t, "m", l.Token()), "held on nodes")
	require.NoError(t, l.Refresh(ctx, 20*time.Second), "Refresh with 2 of 5 down")
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 10*time.Second {
		require.Fail(t, fmt.Sprintf("TTL = %v, %v", ttl, err))
	}
	require.NoError(t, l.Release(ctx), "Release with 2 of 5 down")
	require.Equal(t, 0, q.holders(t, "m", l.Token()), "still held on nodes")
	// A third node down: no majority, an error of its own.
	q.srvs[2].Kill()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Obtain(short, "m", time.Second, redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)))
	require.ErrorIs(t, err, redislock.ErrNoQuorum, "Obtain with 3 of 5 down, want ErrNoQuorum")
	require.NotErrorIs(t, err, redislock.ErrNotObtained, "Obtain with 3 of 5 down, want ErrNoQuorum")
	var ne *redislock.NodeError
	require.ErrorAs(t, err, &ne, "no per-node detail in")
	require.LessOrEqual(t, time.Since(start), 2*time.Second, "Obtain outlived its ctx")
}

// A failing node does not turn contention into ErrNoQuorum: with a majority
// answering and others holding the lock, Obtain reports contention (and
// retries), with the failing node's cause attached.
func TestQuorumContentionWithAFailedNode(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 5)
	ctx := testkit.Context(t)
	for _, rdb := range q.rdbs[:2] {
		rdb.Set(ctx, redislock.DefaultPrefix+"{mixed}", "other:1", time.Minute)
	}
	q.srvs[4].Kill()
	c := q.client(t)
	_, err := c.Obtain(ctx, "mixed", time.Second, redislock.WithRetry(redislock.LimitRetry(redislock.LinearBackoff(time.Millisecond), 2)))
	var ne *redislock.NodeError
	require.ErrorIs(t, err, redislock.ErrNotObtained, "Obtain, want ErrNotObtained with node 4's error")
	require.NotErrorIs(t, err, redislock.ErrNoQuorum, "Obtain, want ErrNotObtained with node 4's error")
	require.ErrorAs(t, err, &ne, "Obtain, want ErrNotObtained with node 4's error")
	require.Equal(t, 4, ne.Node, "Obtain = %v, want ErrNotObtained with node 4's error", err)
}

// A stalled node does not hold up the grant; its late grant is kept as part
// of the lock, and Release releases it.
func TestQuorumStalledNode(t *testing.T) {
	t.Parallel()
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
	require.NoError(t, err)
	defer c.Close()
	ctx := testkit.Context(t)
	_, err = c.Obtain(ctx, "warm", time.Second) // connections up
	require.NoError(t, err)
	q.srvs[4].Pause()
	// Obtain returns while the node is still stopped: an Obtain that waited
	// for it would wait until the node is resumed, after this.
	got := make(chan *redislock.Lock, 1)
	go func() {
		l, err := c.Obtain(ctx, "s", 10*time.Second)
		assert.NoError(t, err)
		got <- l
	}()
	var l *redislock.Lock
	select {
	case l = <-got:
	case <-time.After(10 * time.Second):
		q.srvs[4].Resume()
		require.Fail(t, "the grant waited for the stopped node")
	}
	if l == nil {
		return
	}
	q.srvs[4].Resume()
	require.Eventually(t, func() bool { return q.holders(t, "s", l.Token()) == 5 }, 5*time.Second, 5*time.Millisecond, "the late grant")
	require.NoError(t, l.Release(ctx))
	_ = c.Close() // Release returned at the majority: wait for the rest
	require.Equal(t, 0, q.holders(t, "s", l.Token()), "Release left the grant on nodes")
}

// Release does not wait for a node whose grant has not answered, and its
// release does not run there before the grant (a slow node may run the two
// in either order and leave the grant behind): that node is released once
// its grant answers.
func TestQuorumLateGrantAfterRelease(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 5)
	// Node 4 holds the obtain script (1 key; the release has 3) of key
	// "lr" until the test lets it go.
	hold := make(chan struct{})
	q.rdbs[4].AddHook(holdHook{hold: hold, key: redislock.DefaultPrefix + "{lr}"})
	c, err := redislock.NewQuorum(q.rdbs, slackNodeTimeout)
	require.NoError(t, err)
	ctx := testkit.Context(t)
	l, err := c.Obtain(ctx, "lr", 10*time.Second)
	require.NoError(t, err)
	// Release returns while node 4's grant is still held back.
	require.NoError(t, l.Release(ctx))
	close(hold) // the grant runs on node 4, then its release
	_ = c.Close()
	require.Equal(t, 0, q.holders(t, "lr", l.Token()), "the grant is left on nodes")
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

// A dead or stalled minority of the nodes never slows Obtain, Refresh,
// TTL or Release, and never turns a lock that the majority holds into
// ErrNotHeld. Each test gives the bad nodes' calls a minute (node and
// release timeouts, go-redis timeouts) and lets them go only after the
// test's calls have returned, or after a watchdog fires: a call that
// waited for a bad node would return only after the watchdog, which the
// test then reports.

// patience is far beyond what any call of these tests may take: the bad
// nodes' calls are bounded by it alone.
const patience = time.Minute

// watchdog lets the bad nodes go (free) after d, or when the test ends.
type watchdog struct {
	fired atomic.Bool // free ran on the timer
	once  sync.Once
	timer *time.Timer
	free  func()
}

func newWatchdog(t *testing.T, d time.Duration, free func()) *watchdog {
	w := &watchdog{free: free}
	w.timer = time.AfterFunc(d, func() {
		w.fired.Store(true)
		w.release()
	})
	t.Cleanup(w.release)
	return w
}

// release lets the bad nodes go, once.
func (w *watchdog) release() {
	w.timer.Stop()
	w.once.Do(w.free)
}

// patientClients returns go-redis clients for the cluster's nodes (the
// addresses in addrs replace them where set) whose calls wait a minute.
func patientClients(t *testing.T, q *cluster, addrs map[int]string, dial map[int]func(ctx context.Context, network, addr string) (net.Conn, error)) []redis.UniversalClient {
	var rdbs []redis.UniversalClient
	for i, s := range q.srvs {
		rdbs = append(rdbs, s.Client(func(o *redis.Options) {
			o.MaxRetries = -1
			o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = patience, patience, patience, patience
			if a, ok := addrs[i]; ok {
				o.Addr = a
			}
			if d, ok := dial[i]; ok {
				o.Dialer = d
			}
		}))
	}
	return rdbs
}

// holdThroughMinority runs Obtain, Refresh, TTL and Release on a lock of
// TTL 2 s while the nodes in bad do not answer, checking after each call
// that the watchdog has not fired (the call did not wait for a bad node).
// Then it checks that a lock gone from the live nodes is ErrNotHeld at once.
func holdThroughMinority(t *testing.T, q *cluster, rdbs []redis.UniversalClient, w *watchdog, bad ...int) {
	t.Helper()
	c, err := redislock.NewQuorum(rdbs, redislock.WithNodeTimeout(patience), redislock.WithReleaseTimeout(patience))
	require.NoError(t, err)
	t.Cleanup(func() {
		w.release() // the calls still waiting for bad nodes end
		_ = c.Close()
	})
	fired := w.fired.Load
	ctx, cancel := context.WithTimeout(context.Background(), 2*patience)
	defer cancel()
	check := func(what string, err error) {
		t.Helper()
		require.NoError(t, err, "%s with nodes %v not answering", what, bad)
		require.False(t, fired(), "%s waited for the nodes %v that do not answer", what, bad)
	}
	l, err := c.Obtain(ctx, "minority", 2*time.Second)
	check("Obtain", err)
	check("Refresh", l.Refresh(ctx, 2*time.Second))
	_, err = l.TTL(ctx)
	check("TTL", err)
	check("Release", l.Release(ctx))
	require.Equal(t, 0, q.holders(t, "minority", l.Token()), "Release left the grant on live nodes")

	// A grant gone from the live nodes: ErrNotHeld, without waiting.
	l, err = c.Obtain(ctx, "gone", 2*time.Second)
	check("Obtain", err)
	for i, rdb := range q.rdbs {
		if !isBad(i, bad) {
			rdb.Del(ctx, redislock.DefaultPrefix+"{gone}")
		}
	}
	require.ErrorIs(t, l.Refresh(ctx, 2*time.Second), redislock.ErrNotHeld, "Refresh of a grant gone from the live nodes, want ErrNotHeld")
	require.ErrorIs(t, l.Release(ctx), redislock.ErrNotHeld, "Release of a grant gone from the live nodes, want ErrNotHeld")
	require.False(t, fired(), "ErrNotHeld waited for the nodes %v that do not answer", bad)

	// The calls to the bad nodes go on in the background, and Close waits
	// for them.
	busy := 0
	for _, i := range bad {
		fanned, cleaning := redislock.InFlight(c, i)
		busy += fanned + cleaning
	}
	require.NotEqual(t, 0, busy, "no call in flight to the nodes %v that do not answer", bad)
	w.release()
	_ = c.Close()
	for i := range rdbs {
		fanned, cleaning := redislock.InFlight(c, i)
		require.LessOrEqual(t, fanned+cleaning, 0, "Close returned with %d fan-out and %d clean-up calls in flight to node %d", fanned, cleaning, i)
	}
}

func isBad(i int, bad []int) bool {
	for _, b := range bad {
		if b == i {
			return true
		}
	}
	return false
}

// Two of five nodes killed: their connections are refused, after a dial
// that lasts until the test lets it go (as a dial with retries does).
func TestQuorumMinorityKilled(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 5)
	q.srvs[3].Kill()
	q.srvs[4].Kill()
	gate := make(chan struct{})
	w := newWatchdog(t, 20*time.Second, func() { close(gate) })
	refused := func(ctx context.Context, network, addr string) (net.Conn, error) {
		<-gate
		var d net.Dialer
		return d.DialContext(ctx, network, addr) // connection refused
	}
	rdbs := patientClients(t, q, nil, map[int]func(context.Context, string, string) (net.Conn, error){3: refused, 4: refused})
	holdThroughMinority(t, q, rdbs, w, 3, 4)
}

// Two of five nodes blackholed: a listener accepts their connections and
// never answers.
func TestQuorumMinorityBlackholed(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 5)
	holes := []*redistest.Blackhole{redistest.StartBlackhole(t), redistest.StartBlackhole(t)}
	w := newWatchdog(t, 20*time.Second, func() {
		for _, h := range holes {
			h.Close()
		}
	})
	rdbs := patientClients(t, q, map[int]string{3: holes[0].Addr(), 4: holes[1].Addr()}, nil)
	holdThroughMinority(t, q, rdbs, w, 3, 4)
}

// Two of five nodes stopped (SIGSTOP) with connections open.
func TestQuorumMinorityStopped(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 5)
	rdbs := patientClients(t, q, nil, nil)
	for _, rdb := range rdbs { // connections up before the nodes stop
		require.NoError(t, rdb.Ping(context.Background()).Err())
	}
	q.srvs[3].Pause()
	q.srvs[4].Pause()
	w := newWatchdog(t, 20*time.Second, func() {
		q.srvs[3].Resume()
		q.srvs[4].Resume()
	})
	holdThroughMinority(t, q, rdbs, w, 3, 4)
}
