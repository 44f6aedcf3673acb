package leader_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redislock-go/redislock/leader"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/leasetest"
)

// The election on leasetest.Memory with a fake clock: fast and
// deterministic, no sleeps.

const (
	memLease  = time.Second
	memRenew  = 300 * time.Millisecond
	memMargin = 100 * time.Millisecond
	memRetry  = 100 * time.Millisecond // the grid: every wait and renewal falls on it
)

type memEnv struct {
	t     *testing.T
	clock *leasetest.FakeClock
	m     *leasetest.Memory
}

// waitTimers waits until n timers are pending on the fake clock: every
// goroutine under test waits on it. Ten seconds without is a failure.
func (env memEnv) waitTimers(n int) {
	env.t.Helper()
	done := make(chan struct{})
	go func() {
		env.clock.WaitTimers(n)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		env.t.Fatalf("%d timers pending on the fake clock, want %d: a goroutine under test is stuck or gone", env.clock.Timers(), n)
	}
}

func newMemEnv(t *testing.T) memEnv {
	c := leasetest.NewFakeClock(time.Time{})
	return memEnv{t: t, clock: c, m: leasetest.NewMemory(leasetest.WithClock(c))}
}

// link returns a new candidate's own link to the Memory.
func (env memEnv) link() *link { return &link{m: env.m, clock: env.clock} }

func (env memEnv) candidate(t *testing.T, locker lease.Locker, id string, opts ...leader.Option) *leader.Election {
	t.Helper()
	opts = append([]leader.Option{
		leader.WithIdentity(id), leader.WithClock(env.clock), leader.WithLease(memLease),
		leader.WithRenewInterval(memRenew), leader.WithMargin(memMargin), leader.WithRetryPeriod(memRetry),
		leader.WithObserveInterval(50 * time.Millisecond),
	}, opts...)
	e, err := leader.New(locker, "scheduler", opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func TestNewRejectsBadInput(t *testing.T) {
	m := leasetest.NewMemory()
	for _, c := range []struct {
		name   string
		locker lease.Locker
		elect  string
		opts   []leader.Option
	}{
		{"nil locker", nil, "x", nil},
		{"empty name", m, "", nil},
		{"empty identity", m, "x", []leader.Option{leader.WithIdentity("")}},
		{"long identity", m, "x", []leader.Option{leader.WithIdentity(strings.Repeat("i", lease.MaxHolderLen+1))}},
		{"zero lease", m, "x", []leader.Option{leader.WithLease(0)}},
		{"lease within drift", m, "x", []leader.Option{leader.WithLease(2 * time.Millisecond)}},
		{"zero renew interval", m, "x", []leader.Option{leader.WithRenewInterval(0)}},
		{"renew interval above lease", m, "x", []leader.Option{leader.WithLease(time.Second), leader.WithRenewInterval(time.Second)}},
		{"negative margin", m, "x", []leader.Option{leader.WithMargin(-time.Millisecond)}},
		{"margin leaves no renewal", m, "x", []leader.Option{leader.WithLease(time.Second), leader.WithMargin(700 * time.Millisecond)}},
		{"zero retry period", m, "x", []leader.Option{leader.WithRetryPeriod(0)}},
		{"zero observe interval", m, "x", []leader.Option{leader.WithObserveInterval(0)}},
		{"nil clock", m, "x", []leader.Option{leader.WithClock(nil)}},
	} {
		e, err := leader.New(c.locker, c.elect, c.opts...)
		if e != nil || !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("New with %s: %v, %v; want an error matching ErrInvalidArgument", c.name, e, err)
		}
	}
	e, err := leader.New(m, "x", leader.WithMargin(0))
	if err != nil {
		t.Fatalf("New with margin 0: %v", err)
	}
	if !strings.Contains(e.Identity(), ":") || e.Key() != leader.DefaultPrefix+"x" {
		t.Errorf("defaults: identity %q, key %q", e.Identity(), e.Key())
	}
	if err := e.Run(context.Background(), leader.Callbacks{}); !errors.Is(err, lease.ErrInvalidArgument) {
		t.Errorf("Run without OnStartedLeading: %v", err)
	}
}

// A resignation hands over at once: the waiting candidate wins at the same
// instant of the fake clock, with a higher term, and Leader follows.
func TestResignHandsOverAtOnce(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxFor(t)
	a := env.candidate(t, env.link(), "a")
	b := env.candidate(t, env.link(), "b")
	if _, err := a.Leader(ctx); !errors.Is(err, leader.ErrNoLeader) {
		t.Fatalf("Leader before any campaign: %v, want ErrNoLeader", err)
	}
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := a.Campaign(ctx); err != nil || again != ta {
		t.Fatalf("Campaign while leading: %v, %v; want the current term", again, err)
	}
	if info, err := b.Leader(ctx); err != nil || info.Identity != "a" || info.Term != ta.Fence() {
		t.Fatalf("Leader: %+v, %v; want a at term %d", info, err, ta.Fence())
	}
	won := make(chan *leader.Term, 1)
	go func() {
		tb, err := b.Campaign(ctx)
		if err != nil {
			t.Error(err)
		}
		won <- tb
	}()
	env.waitTimers(4) // a's renewal, its lease watchdog, its margin; b's wait
	at := env.clock.Now()
	if err := a.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	tb := recv(t, ctx, won, "b's term")
	if !tb.Started().Equal(at) {
		t.Errorf("b won %v after the resignation; want at once", tb.Started().Sub(at))
	}
	if tb.Fence() <= ta.Fence() {
		t.Errorf("term %d after %d", tb.Fence(), ta.Fence())
	}
	wantIs(t, "a's term after Resign", ta.Err(), leader.ErrResigned)
	if a.Current() != nil || b.Current() != tb {
		t.Errorf("Current: a %v, b %v", a.Current(), b.Current())
	}
	if info, err := a.Leader(ctx); err != nil || info.Identity != "b" || info.Term != tb.Fence() {
		t.Fatalf("Leader after the handover: %+v, %v", info, err)
	}
	if err := ta.Resign(ctx); err != nil {
		t.Errorf("second Resign: %v, want the first's result", err)
	}
	if err := a.Resign(ctx); err != nil {
		t.Errorf("Resign of a candidate that does not lead: %v", err)
	}
	if err := tb.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCampaignEndsWithContext(t *testing.T) {
	env := newMemEnv(t)
	a := env.candidate(t, env.link(), "a")
	b := env.candidate(t, env.link(), "b")
	ta, err := a.Campaign(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ta.Resign(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.Campaign(ctx)
		done <- err
	}()
	env.waitTimers(4)
	cancel()
	wantIs(t, "Campaign after cancel", <-done, lease.ErrNotObtained, context.Canceled)
	if b.Current() != nil {
		t.Error("b leads after a cancelled campaign")
	}
	cut := env.link()
	c := env.candidate(t, cut, "c")
	cut.cut.Store(true)
	if _, err := c.Campaign(ctxFor(t)); !errors.Is(err, errCut) || errors.Is(err, lease.ErrNotObtained) {
		t.Errorf("Campaign over a cut link: %v, want the backend's error", err)
	}
}

// step lets one retry period pass on the fake clock, once n timers are
// pending: every candidate has gone back to waiting. Leases, renewals and
// the candidates' waits all fall on a grid of the retry period, so each
// candidate wakes at the end of a step and reads the clock there: nothing
// reads a time that a longer Advance has already left behind.
func (env memEnv) step(n int) {
	env.t.Helper()
	env.waitTimers(n)
	env.clock.Advance(memRetry)
}

// A leader whose renewals cannot get through is cancelled a margin before
// its validity ends; the next candidate wins exactly when the lease ends
// on the backend, one lease after the last renewal, and not before.
func TestPartitionedLeaderStopsBeforeSuccessor(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxFor(t)
	la := env.link()
	a := env.candidate(t, la, "a")
	b := env.candidate(t, env.link(), "b")
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	won := make(chan *leader.Term, 1)
	go func() {
		tb, err := b.Campaign(ctx)
		if err != nil {
			t.Error(err)
		}
		won <- tb
	}()
	const live = 4 // a's renewal, lease watchdog and margin; b's wait
	for range memRenew / memRetry {
		env.step(live) // one renewal gets through
	}
	la.cut.Store(true)
	claimed := ta.ValidUntil()
	expiry := la.lastLock().lastOK().Add(memLease) // the renewal's lease on the Memory
	if want := ta.Started().Add(memRenew + memLease); !expiry.Equal(want) {
		t.Fatalf("the renewal's lease ends at start%+v, want start%+v", expiry.Sub(ta.Started()), want.Sub(ta.Started()))
	}
	for env.clock.Now().Add(memRetry).Before(claimed) {
		env.step(live)
	}
	if err := ta.Err(); err != nil {
		t.Fatalf("a's term ended %v before its claimed validity: %v", claimed.Sub(env.clock.Now()), err)
	}
	env.step(live) // past claimed
	select {
	case <-ta.Done():
	default:
		t.Fatal("a's term not over after its ValidUntil")
	}
	wantIs(t, "a's term", ta.Err(), lease.ErrLockLost, lease.ErrLeaseExpired)
	if !ta.ValidUntil().IsZero() {
		t.Errorf("ValidUntil after the end: %v", ta.ValidUntil())
	}
	for env.clock.Now().Add(memRetry).Before(expiry) {
		env.step(1) // b alone waits
	}
	env.waitTimers(1)
	select {
	case tb := <-won:
		t.Fatalf("b won %v before a's lease ended", expiry.Sub(tb.Started()))
	default:
	}
	env.step(1)
	tb := recv(t, ctx, won, "b's term")
	if !tb.Started().Equal(expiry) {
		t.Errorf("b won %v after a's lease ended; want at its end", tb.Started().Sub(expiry))
	}
	if gap := tb.Started().Sub(claimed); gap < memMargin {
		t.Errorf("a stopped only %v before b won; want at least the margin %v", gap, memMargin)
	}
	if err := ta.Resign(ctx); err == nil {
		t.Error("Resign of a lost term: nil, want its release's error")
	}
	if err := tb.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// A renewal that finds the lock gone ends the term with ErrNotHeld.
func TestBrokenLockEndsTerm(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxFor(t)
	a := env.candidate(t, env.m, "a")
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env.m.Break(a.Key())
	env.clock.Advance(memRenew)
	select {
	case <-ta.Done():
	default:
		t.Fatal("term not over after a renewal found the lock gone")
	}
	wantIs(t, "term", ta.Err(), lease.ErrLockLost, lease.ErrNotHeld)
	if a.Current() != nil {
		t.Error("Current after the loss")
	}
	wantIs(t, "Resign", ta.Resign(ctx), lease.ErrNotHeld)
}

// Observe reports the vacancy, then each new term; it closes the channel
// when its ctx ends.
func TestObserve(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxFor(t)
	a := env.candidate(t, env.m, "a")
	b := env.candidate(t, env.m, "b")
	watcher := env.candidate(t, env.m, "w")
	octx, stop := context.WithCancel(ctx)
	ch := watcher.Observe(octx)
	if v := recv(t, ctx, ch, "first value"); v != (leader.Info{}) {
		t.Fatalf("first value %+v, want the vacancy", v)
	}
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env.clock.Advance(50 * time.Millisecond)
	if v := recv(t, ctx, ch, "a"); v.Identity != "a" || v.Term != ta.Fence() {
		t.Fatalf("after a won: %+v", v)
	}
	if err := ta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	env.clock.Advance(50 * time.Millisecond)
	if v := recv(t, ctx, ch, "vacancy"); v != (leader.Info{}) {
		t.Fatalf("after a resigned: %+v", v)
	}
	tb, err := b.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Resign(ctx)
	env.clock.Advance(50 * time.Millisecond)
	if v := recv(t, ctx, ch, "b"); v.Identity != "b" || v.Term <= ta.Fence() {
		t.Fatalf("after b won: %+v", v)
	}
	// A candidate's own win is reported without waiting for a poll.
	own := b.Observe(octx)
	if v := recv(t, ctx, own, "b's own view"); v.Identity != "b" {
		t.Fatalf("b's own observer: %+v", v)
	}
	stop()
	for range ch {
	}
	for range own {
	}
}

// Run calls the callbacks in order, keeps the lock while the work runs
// after its ctx was cancelled, and gives it back only once the work has
// returned. It runs in a synctest bubble (leasetest.Memory on the bubble's
// clock), so that synctest.Wait lets every goroutine Run started act on
// the cancellation before the test looks at the lock.
func TestRunWaitsForWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := leasetest.NewMemory()
		ctx := ctxFor(t)
		a, err := leader.New(m, "scheduler", leader.WithIdentity("a"), leader.WithLease(memLease))
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		var (
			mu     sync.Mutex
			events []string
		)
		log := func(s string) {
			mu.Lock()
			events = append(events, s)
			mu.Unlock()
		}
		started := make(chan *leader.Term)
		release := make(chan struct{})
		newLeader := make(chan string, 1)
		errWork := errors.New("work stopped")
		done := make(chan error, 1)
		go func() {
			done <- a.Run(rctx, leader.Callbacks{
				OnStartedLeading: func(ctx context.Context, term *leader.Term) error {
					log("started")
					started <- term
					<-ctx.Done()
					<-release
					log("work returned")
					return errWork
				},
				OnStoppedLeading: func() { log("stopped") },
				OnNewLeader: func(id string) {
					select {
					case newLeader <- id:
					default:
					}
				},
			})
		}()
		term := recv(t, ctx, started, "OnStartedLeading")
		if id := recv(t, ctx, newLeader, "OnNewLeader"); id != "a" {
			t.Errorf("OnNewLeader(%q), want a", id)
		}
		cancel()
		synctest.Wait()
		// The work's ctx is cancelled; the term goes on until the work returns.
		if info, err := m.Inspect(ctx, a.Key()); err != nil || !info.Held || info.Fence != term.Fence() || term.Err() != nil {
			t.Fatalf("after Run's ctx ended, before the work returned: %+v, %v, term %v", info, err, term.Err())
		}
		close(release)
		err = recv(t, ctx, done, "Run")
		if !errors.Is(err, errWork) || errors.Is(err, lease.ErrLockLost) {
			t.Errorf("Run: %v, want the work's error alone", err)
		}
		mu.Lock()
		got := strings.Join(events, ", ")
		mu.Unlock()
		if want := "started, work returned, stopped"; got != want {
			t.Errorf("callbacks: %s; want %s", got, want)
		}
		if info, err := m.Inspect(ctx, a.Key()); err != nil || info.Held {
			t.Errorf("after Run: %+v, %v; want the lock given back", info, err)
		}
		wantIs(t, "term after Run", term.Err(), leader.ErrResigned)
	})
}

// A lost term cancels the work's ctx with ErrLockLost, and Run reports it.
func TestRunReportsLoss(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxFor(t)
	a := env.candidate(t, env.m, "a")
	errWork := errors.New("work stopped")
	stopped := false
	err := a.Run(ctx, leader.Callbacks{
		OnStartedLeading: func(ctx context.Context, term *leader.Term) error {
			env.m.Break(a.Key())
			env.clock.Advance(memRenew)
			<-ctx.Done()
			wantIs(t, "work's ctx cause", context.Cause(ctx), lease.ErrLockLost)
			return errWork
		},
		OnStoppedLeading: func() { stopped = true },
	})
	wantIs(t, "Run after a loss", err, errWork, lease.ErrLockLost, lease.ErrNotHeld)
	if !stopped {
		t.Error("OnStoppedLeading not called")
	}
}

// A panicking leader gives the lock back and OnStoppedLeading runs before
// the panic goes on.
func TestRunReleasesOnPanic(t *testing.T) {
	env := newMemEnv(t)
	ctx := ctxFor(t)
	a := env.candidate(t, env.m, "a")
	stopped := false
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the work's panic", r)
			}
		}()
		_ = a.Run(ctx, leader.Callbacks{
			OnStartedLeading: func(context.Context, *leader.Term) error { panic("boom") },
			OnStoppedLeading: func() { stopped = true },
			OnNewLeader:      func(string) {},
		})
	}()
	if !stopped {
		t.Error("OnStoppedLeading not called after a panic")
	}
	if info, err := env.m.Inspect(ctx, a.Key()); err != nil || info.Held {
		t.Errorf("after a panic: %+v, %v; want the lock given back", info, err)
	}
}

func TestRunEndsWithContext(t *testing.T) {
	env := newMemEnv(t)
	a := env.candidate(t, env.m, "a")
	b := env.candidate(t, env.m, "b")
	ta, err := a.Campaign(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ta.Resign(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Run(ctx, leader.Callbacks{
			OnStartedLeading: func(context.Context, *leader.Term) error { t.Error("b led"); return nil },
			OnStoppedLeading: func() { t.Error("OnStoppedLeading without leading") },
		})
	}()
	env.waitTimers(4)
	cancel()
	wantIs(t, "Run cancelled while campaigning", <-done, lease.ErrNotObtained, context.Canceled)
}

// Hundreds of forced failovers on the fake clock: each round cuts the
// leader's link, so that its renewals fail, and lets time run to the end of
// its lease. Every round: the old leader's term ends before the new one
// begins, the new one begins exactly when the old lease ends (one lease
// after its last renewal), terms strictly increase, and the fenced sink
// refuses the old leader's late write and never sees two valid leaders.
func TestFailoverStormMemory(t *testing.T) {
	const candidates, rounds = 5, 500
	env := newMemEnv(t)
	ctx := ctxFor(t)
	rctx, stop := context.WithCancel(ctx)
	s := &sink{now: env.clock.Now}
	type win struct {
		term *leader.Term
		link *link
		back chan struct{} // the link is restored
	}
	wins := make(chan win)
	var wg sync.WaitGroup
	for i := range candidates {
		l := env.link()
		e := env.candidate(t, l, fmt.Sprintf("c%d", i))
		back := make(chan struct{}, 1)
		wg.Go(func() {
			for rctx.Err() == nil {
				term, err := e.Campaign(rctx)
				switch {
				case rctx.Err() != nil:
					return
				case errors.Is(err, errCut):
					select {
					case <-back:
					case <-rctx.Done():
					}
					continue
				case err != nil:
					t.Errorf("c%d: Campaign: %v", i, err)
					return
				}
				select {
				case wins <- win{term, l, back}:
				case <-rctx.Done():
					_ = term.Resign(ctx)
					return
				}
				<-term.Done()
				_ = term.Resign(ctx) // over a cut link: fails, as it would
			}
		})
	}
	cur := recv(t, ctx, wins, "the first leader")
	const leading, waiting = 3, candidates - 1 // timers: the leader's renewal, lease watchdog, margin; one per waiter
	var lastTerm int64
	for r := range rounds {
		// 0, 1 or 2 renewals get through, then the leader's link is cut.
		for range (r % 3) * int(memRenew/memRetry) {
			if err := s.writeAs(cur.term); err != nil {
				t.Fatalf("round %d: the leader's write: %v", r, err)
			}
			env.step(leading + waiting)
		}
		claimed := cur.term.ValidUntil()
		expiry := cur.link.lastLock().lastOK().Add(memLease) // the lease on the Memory
		cur.link.cut.Store(true)
		for env.clock.Now().Before(expiry) {
			n := waiting
			if cur.term.Err() == nil {
				n += leading
				if err := s.writeAs(cur.term); err != nil {
					t.Fatalf("round %d: the cut leader's write before its validity ended: %v", r, err)
				}
			}
			env.step(n)
		}
		next := recv(t, ctx, wins, "the next leader")
		old := cur.term
		if !next.term.Started().Equal(expiry) {
			t.Fatalf("round %d: term %d began %v after the lease of term %d ended; want at its end",
				r, next.term.Fence(), next.term.Started().Sub(expiry), old.Fence())
		}
		select {
		case <-old.Done():
		default:
			t.Fatalf("round %d: term %d still running when term %d began", r, old.Fence(), next.term.Fence())
		}
		if next.term.Started().Before(claimed) {
			t.Fatalf("round %d: term %d began %v before term %d's claimed validity ended",
				r, next.term.Fence(), claimed.Sub(next.term.Started()), old.Fence())
		}
		if next.term.Fence() <= old.Fence() || old.Fence() <= lastTerm {
			t.Fatalf("round %d: terms %d, %d after %d: must increase", r, old.Fence(), next.term.Fence(), lastTerm)
		}
		lastTerm = old.Fence()
		if err := s.writeAs(next.term); err != nil {
			t.Fatalf("round %d: the new leader's write: %v", r, err)
		}
		// The old leader, resumed, still has its fence: the sink refuses it.
		if err := s.write(old.Fence(), claimed); !errors.Is(err, lease.ErrStaleFence) {
			t.Fatalf("round %d: the old leader's late write: %v, want ErrStaleFence", r, err)
		}
		env.waitTimers(leading + waiting - 1) // the old leader is off
		cur.link.cut.Store(false)
		select { // unless it has not yet found the link cut
		case cur.back <- struct{}{}:
		default:
		}
		env.waitTimers(leading + waiting)
		cur = next
	}
	stop()
	_ = cur.term.Resign(ctx)
	wg.Wait()
	s.check(t)
}
