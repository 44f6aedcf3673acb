package leader_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/leader"
	"github.com/redislock-go/redislock/lease"
)

// The election on real redis-servers: five candidates, each with its own
// Client and its own connections through a proxy that can cut them. These
// tests run one at a time, not in parallel: their 50 ms leases and 500 ms
// read timeouts leave no room for the load of other tests.

const (
	redisLease  = 50 * time.Millisecond
	redisRenew  = 15 * time.Millisecond
	redisMargin = 10 * time.Millisecond
)

// rcand is one candidate process, in effect: its own Client on its own
// connections.
type rcand struct {
	id string
	e  *leader.Election
	px []*redistest.Proxy // one per Redis node
}

func (c *rcand) cut() {
	for _, p := range c.px {
		p.Cut(redistest.Both)
	}
}

func (c *rcand) restore() {
	for _, p := range c.px {
		p.Restore()
	}
}

func (c *rcand) waitRestored(ctx context.Context) {
	for _, p := range c.px {
		p.WaitRestored(ctx)
	}
}

// newCandidates starts n candidates on srvs: single mode on one server,
// quorum mode on more.
func newCandidates(t *testing.T, srvs []*redistest.Server, n int, opts ...leader.Option) []*rcand {
	t.Helper()
	cs := make([]*rcand, n)
	for i := range cs {
		c := &rcand{id: fmt.Sprintf("c%d", i)}
		var rdbs []redis.UniversalClient
		for _, s := range srvs {
			p := redistest.StartProxy(t, s.Addr())
			c.px = append(c.px, p)
			rdb := redis.NewClient(&redis.Options{
				Addr: p.Addr(), DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond,
				WriteTimeout: 500 * time.Millisecond, ContextTimeoutEnabled: true, MaxRetries: -1,
			})
			t.Cleanup(func() { _ = rdb.Close() })
			rdbs = append(rdbs, rdb)
		}
		var client *redislock.Client
		if len(rdbs) == 1 {
			client = redislock.New(rdbs[0], redislock.WithReleaseTimeout(100*time.Millisecond))
		} else {
			var err error
			if client, err = redislock.NewQuorum(rdbs, redislock.WithReleaseTimeout(100*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { _ = client.Close() })
		opts := append([]leader.Option{
			leader.WithHolder(c.id), leader.WithLease(redisLease), leader.WithRefreshInterval(redisRenew),
			leader.WithMargin(redisMargin), leader.WithRetry(lease.LinearBackoff(redisLease)), leader.WithObserveInterval(10 * time.Millisecond),
		}, opts...)
		e, err := leader.New(client.Locker(), "failover", opts...)
		require.NoError(t, err)
		c.e = e
		cs[i] = c
	}
	return cs
}

// rwin is a term won by a candidate; closing quit makes its work return.
type rwin struct {
	c    *rcand
	term *leader.Term
	quit chan struct{}
}

// terms records every term's validity window, as its leader saw it: from
// its start to the end of the latest validity it claimed, or to when it
// stopped acting, if sooner (a resignation). For the check that no two
// windows overlap.
type terms struct {
	mu    sync.Mutex
	start map[int64]time.Time // guarded by mu
	until map[int64]time.Time // guarded by mu: the latest ValidUntil claimed
	stop  map[int64]time.Time // guarded by mu: when the leader's work returned
}

func (ts *terms) stopped(term *leader.Term) {
	now := time.Now()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.stop[term.Fence()] = now
}

func (ts *terms) claim(term *leader.Term) {
	vu := term.ValidUntil()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if vu.After(ts.until[term.Fence()]) {
		ts.until[term.Fence()] = vu
	}
}

// check fails t if a term began before the claimed validity of the term
// before it ended, or if terms did not increase in the order they began.
func (ts *terms) check(t *testing.T) {
	t.Helper()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	fences := make([]int64, 0, len(ts.start))
	for f := range ts.start {
		fences = append(fences, f)
	}
	slices.Sort(fences)
	for i := 1; i < len(fences); i++ {
		prev, f := fences[i-1], fences[i]
		assert.False(t, ts.start[f].Before(ts.start[prev]), "term %d began before term %d", f, prev)
		until := ts.until[prev]
		if stop, ok := ts.stop[prev]; ok && stop.Before(until) {
			until = stop
		}
		if ts.start[f].Before(until) {
			t.Errorf("term %d began %v before the validity claimed by term %d ended", f, until.Sub(ts.start[f]), prev)
		}
	}
}

// runCandidates runs each candidate as Run in a loop until ctx ends. Each
// leader writes to s every millisecond until its term ends or the test
// closes its quit channel, records its claimed validity in ts, and
// reports its term on wins.
func runCandidates(t *testing.T, ctx context.Context, cs []*rcand, s *sink, ts *terms) (wins <-chan rwin, wait func()) {
	ch := make(chan rwin)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := c.e.Run(ctx, leader.Callbacks{OnStartedLeading: func(wctx context.Context, term *leader.Term) error {
					ts.mu.Lock()
					ts.start[term.Fence()] = term.Started()
					ts.mu.Unlock()
					ts.claim(term)
					_ = s.writeAs(term)
					defer ts.stopped(term)
					w := rwin{c: c, term: term, quit: make(chan struct{})}
					select {
					case ch <- w:
					case <-wctx.Done():
						return nil
					}
					tick := time.NewTicker(time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-wctx.Done():
							return nil
						case <-w.quit:
							return nil
						case <-tick.C:
							ts.claim(term)
							_ = s.writeAs(term)
						}
					}
				}})
				switch {
				case ctx.Err() != nil:
				case errors.Is(err, lease.ErrLockLost), err == nil:
				default: // the link is cut: wait until it is back
					c.waitRestored(ctx)
				}
			}
		})
	}
	return ch, wg.Wait
}

func newTerms() *terms {
	return &terms{start: make(map[int64]time.Time), until: make(map[int64]time.Time), stop: make(map[int64]time.Time)}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// Five candidates; the leader's connections are cut again and again (200
// times, 20 under -short), so
// that its renewals cannot get through. Each time a new leader takes over
// (within about one lease), no two leaders' claimed validity windows
// overlap, terms strictly increase, and the fenced sink never takes a
// write made within a claimed validity after a higher term wrote.
func TestFailoverRedis(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 20 // the soak's checks on fewer failovers
	}
	srv := redistest.Start(t)
	cs := newCandidates(t, []*redistest.Server{srv}, 5)
	ctx, cancel := context.WithCancel(ctxFor(t))
	s := &sink{now: time.Now}
	ts := newTerms()
	wins, wait := runCandidates(t, ctx, cs, s, ts)
	defer wait()
	defer cancel()
	cur := recv(t, ctx, wins, "the first leader")
	var took []time.Duration
	for r := range rounds {
		at := time.Now()
		cur.c.cut()
		next := recv(t, ctx, wins, fmt.Sprintf("the leader after cut %d", r))
		took = append(took, next.term.Started().Sub(at))
		require.Greater(t, next.term.Fence(), cur.term.Fence(), "cut %d: term %d after %d", r, next.term.Fence(), cur.term.Fence())
		cur.c.restore()
		cur = next
	}
	cancel()
	wait()
	ts.check(t)
	s.check(t)
	t.Logf("%d forced failovers, lease %v: new leader after the cut p50 %v, p99 %v, max %v",
		rounds, redisLease, percentile(took, 0.5), percentile(took, 0.99), percentile(took, 1))
}

// Five candidates hand leadership over by resigning, hundreds of times:
// the handover time, from the leader's decision to stop to the next
// leader's term, is logged (the target is 100 ms p99; it is not asserted).
func TestResignHandoverRedis(t *testing.T) {
	const rounds = 300
	srv := redistest.Start(t)
	cs := newCandidates(t, []*redistest.Server{srv}, 5, leader.WithLease(2*time.Second), leader.WithRetry(lease.LinearBackoff(time.Second)))
	ctx, cancel := context.WithCancel(ctxFor(t))
	s := &sink{now: time.Now}
	ts := newTerms()
	wins, wait := runCandidates(t, ctx, cs, s, ts)
	defer wait()
	defer cancel()
	cur := recv(t, ctx, wins, "the first leader")
	var took []time.Duration
	for r := range rounds {
		at := time.Now()
		close(cur.quit)
		next := recv(t, ctx, wins, fmt.Sprintf("the leader after resignation %d", r))
		took = append(took, next.term.Started().Sub(at))
		require.Greater(t, next.term.Fence(), cur.term.Fence(), "resignation %d: term %d after %d", r, next.term.Fence(), cur.term.Fence())
		wantIs(t, "the resigned term", cur.term.Err(), leader.ErrResigned)
		cur = next
	}
	cancel()
	wait()
	ts.check(t)
	s.check(t)
	t.Logf("%d resignations: handover p50 %v, p99 %v, max %v",
		rounds, percentile(took, 0.5), percentile(took, 0.99), percentile(took, 1))
}

// Observe and OnNewLeader follow the leadership on Redis.
func TestObserveRedis(t *testing.T) {
	srv := redistest.Start(t)
	cs := newCandidates(t, []*redistest.Server{srv}, 3, leader.WithLease(2*time.Second))
	ctx := ctxFor(t)
	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen := cs[2].e.Observe(octx)
	if v := recv(t, ctx, seen, "the first value"); v != (leader.Info{}) {
		t.Fatalf("first value %+v, want the vacancy", v)
	}
	var last int64
	for i := range 4 {
		c := cs[i%2]
		term, err := c.e.Campaign(ctx)
		require.NoError(t, err)
		for {
			v := recv(t, ctx, seen, "the new leader")
			if v == (leader.Info{}) {
				// A vacancy between the resignation and the next win, when
				// a poll falls in that gap (a loaded machine makes it wide):
				// legitimate, and no going back.
				continue
			}
			require.GreaterOrEqual(t, v.Term, last, "Observe went back from term %d to %+v", last, v)
			last = v.Term
			if v.Identity == c.id && v.Term == term.Fence() {
				break
			}
		}
		if info, err := cs[2].e.Leader(ctx); err != nil || info.Identity != c.id || info.TTL <= 0 {
			t.Fatalf("Leader: %+v, %v; want %s", info, err, c.id)
		}
		require.NoError(t, term.Resign(ctx))
	}
	stop()
	for range seen {
	}
}

// Quorum mode on three servers: failovers by cutting the leader from every
// node, and resignations, which the candidates find by polling (quorum
// mode has no wake-up across clients).
func TestQuorumRedis(t *testing.T) {
	const rounds = 20
	srvs := redistest.StartN(t, 3)
	cs := newCandidates(t, srvs, 3, leader.WithLease(200*time.Millisecond), leader.WithRefreshInterval(50*time.Millisecond),
		leader.WithMargin(30*time.Millisecond), leader.WithRetry(lease.LinearBackoff(20*time.Millisecond)))
	ctx, cancel := context.WithCancel(ctxFor(t))
	s := &sink{now: time.Now}
	ts := newTerms()
	wins, wait := runCandidates(t, ctx, cs, s, ts)
	defer wait()
	defer cancel()
	cur := recv(t, ctx, wins, "the first leader")
	for r := range rounds {
		if r%2 == 0 {
			cur.c.cut()
		} else {
			close(cur.quit)
		}
		next := recv(t, ctx, wins, fmt.Sprintf("the leader after round %d", r))
		require.Greater(t, next.term.Fence(), cur.term.Fence(), "round %d: term %d after %d", r, next.term.Fence(), cur.term.Fence())
		cur.c.restore()
		cur = next
	}
	cancel()
	wait()
	ts.check(t)
	s.check(t)
}
