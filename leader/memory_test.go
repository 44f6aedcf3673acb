package leader_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	env.clock.AwaitTimers(env.t, n, 10*time.Second)
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
		leader.WithHolder(id), leader.WithClock(env.clock), leader.WithLease(memLease),
		leader.WithRefreshInterval(memRenew), leader.WithMargin(memMargin), leader.WithRetry(lease.LinearBackoff(memRetry)),
		leader.WithObserveInterval(50 * time.Millisecond),
	}, opts...)
	e, err := leader.New(locker, "scheduler", opts...)
	require.NoError(t, err, "New")
	return e
}

func TestNewRejectsBadInput(t *testing.T) {
	t.Parallel()
	m := leasetest.NewMemory()
	for _, c := range []struct {
		name   string
		locker lease.Locker
		elect  string
		opts   []leader.Option
	}{
		{"nil locker", nil, "x", nil},
		{"empty name", m, "", nil},
		{"empty identity", m, "x", []leader.Option{leader.WithHolder("")}},
		{"long identity", m, "x", []leader.Option{leader.WithHolder(strings.Repeat("i", lease.MaxHolderLen+1))}},
		{"zero lease", m, "x", []leader.Option{leader.WithLease(0)}},
		{"lease within drift", m, "x", []leader.Option{leader.WithLease(2 * time.Millisecond)}},
		{"zero renew interval", m, "x", []leader.Option{leader.WithRefreshInterval(0)}},
		{"renew interval above lease", m, "x", []leader.Option{leader.WithLease(time.Second), leader.WithRefreshInterval(time.Second)}},
		{"negative margin", m, "x", []leader.Option{leader.WithMargin(-time.Millisecond)}},
		{"margin leaves no renewal", m, "x", []leader.Option{leader.WithLease(time.Second), leader.WithMargin(700 * time.Millisecond)}},
		{"nil retry", m, "x", []leader.Option{leader.WithRetry(nil)}},
		{"zero observe interval", m, "x", []leader.Option{leader.WithObserveInterval(0)}},
		{"nil clock", m, "x", []leader.Option{leader.WithClock(nil)}},
	} {
		e, err := leader.New(c.locker, c.elect, c.opts...)
		assert.False(t, e != nil || !errors.Is(err, lease.ErrInvalidArgument), "New with %s: %v, %v; want an error matching ErrInvalidArgument", c.name, e, err)
	}
	e, err := leader.New(m, "x", leader.WithMargin(0))
	require.NoError(t, err, "New with margin 0")
	assert.False(t, !strings.Contains(e.Identity(), ":") || e.Key() != lease.Key(leader.DefaultPrefix, "x"), "defaults: identity %q, key %q", e.Identity(), e.Key())
	assert.ErrorIs(t, e.Run(context.Background(), leader.Callbacks{}), lease.ErrInvalidArgument, "Run without OnStartedLeading")
}

// A resignation hands over at once: the waiting candidate wins at the same
// instant of the fake clock, with a higher term, and Leader follows.
func TestResignHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	a := env.candidate(t, env.link(), "a")
	b := env.candidate(t, env.link(), "b")
	_, err := a.Leader(ctx)
	require.ErrorIs(t, err, leader.ErrNoLeader, "Leader before any campaign, want ErrNoLeader")
	ta, err := a.Campaign(ctx)
	require.NoError(t, err)
	if again, err := a.Campaign(ctx); err != nil || again != ta {
		t.Fatalf("Campaign while leading: %v, %v; want the current term", again, err)
	}
	if info, err := b.Leader(ctx); err != nil || info.Identity != "a" || info.Term != ta.Fence() {
		t.Fatalf("Leader: %+v, %v; want a at term %d", info, err, ta.Fence())
	}
	won := make(chan *leader.Term, 1)
	go func() {
		tb, err := b.Campaign(ctx)
		assert.NoError(t, err)
		won <- tb
	}()
	env.waitTimers(4) // a's renewal, its lease watchdog, its margin; b's wait
	at := env.clock.Now()
	require.NoError(t, a.Resign(ctx), "Resign")
	tb := recv(t, ctx, won, "b's term")
	assert.True(t, tb.Started().Equal(at), "b won %v after the resignation; want at once", tb.Started().Sub(at))
	assert.Greater(t, tb.Fence(), ta.Fence(), "term %d after %d", tb.Fence(), ta.Fence())
	wantIs(t, "a's term after Resign", ta.Err(), leader.ErrResigned)
	assert.False(t, a.Current() != nil || b.Current() != tb, "Current: a %v, b %v", a.Current(), b.Current())
	if info, err := a.Leader(ctx); err != nil || info.Identity != "b" || info.Term != tb.Fence() {
		t.Fatalf("Leader after the handover: %+v, %v", info, err)
	}
	assert.NoError(t, ta.Resign(ctx), "second Resign, want the first's result")
	assert.NoError(t, a.Resign(ctx), "Resign of a candidate that does not lead")
	require.NoError(t, tb.Resign(ctx))
}

func TestCampaignEndsWithContext(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	a := env.candidate(t, env.link(), "a")
	b := env.candidate(t, env.link(), "b")
	ta, err := a.Campaign(ctxFor(t))
	require.NoError(t, err)
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
	assert.False(t, b.Current() != nil, "b leads after a cancelled campaign")
	cut := env.link()
	c := env.candidate(t, cut, "c")
	cut.cut.Store(true)
	if _, err := c.Campaign(ctxFor(t)); !errors.Is(err, errCut) || errors.Is(err, lease.ErrNotObtained) {
		t.Errorf("Campaign over a cut link: %v, want the backend's error", err)
	}
}

// A renewal that finds the lock gone ends the term with ErrNotHeld.
func TestBrokenLockEndsTerm(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	a := env.candidate(t, env.m, "a")
	ta, err := a.Campaign(ctx)
	require.NoError(t, err)
	env.m.Break(a.Key())
	env.clock.Advance(memRenew)
	select {
	case <-ta.Done():
	default:
		t.Fatal("term not over after a renewal found the lock gone")
	}
	wantIs(t, "term", ta.Err(), lease.ErrLockLost, lease.ErrNotHeld)
	assert.False(t, a.Current() != nil, "Current after the loss")
	wantIs(t, "Resign", ta.Resign(ctx), lease.ErrNotHeld)
}

// Observe reports the vacancy, then each new term; it closes the channel
// when its ctx ends.
func TestObserve(t *testing.T) {
	t.Parallel()
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
	require.NoError(t, err)
	env.clock.Advance(50 * time.Millisecond)
	if v := recv(t, ctx, ch, "a"); v.Identity != "a" || v.Term != ta.Fence() {
		t.Fatalf("after a won: %+v", v)
	}
	require.NoError(t, ta.Resign(ctx))
	env.clock.Advance(50 * time.Millisecond)
	if v := recv(t, ctx, ch, "vacancy"); v != (leader.Info{}) {
		t.Fatalf("after a resigned: %+v", v)
	}
	tb, err := b.Campaign(ctx)
	require.NoError(t, err)
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
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := leasetest.NewMemory()
		ctx := ctxFor(t)
		a, err := leader.New(m, "scheduler", leader.WithHolder("a"), leader.WithLease(memLease))
		require.NoError(t, err)
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
		assert.False(t, !errors.Is(err, errWork) || errors.Is(err, lease.ErrLockLost), "Run: %v, want the work's error alone", err)
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
	t.Parallel()
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
	assert.True(t, stopped, "OnStoppedLeading not called")
}

// A panicking leader gives the lock back and OnStoppedLeading runs before
// the panic goes on.
func TestRunReleasesOnPanic(t *testing.T) {
	t.Parallel()
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
	assert.True(t, stopped, "OnStoppedLeading not called after a panic")
	if info, err := env.m.Inspect(ctx, a.Key()); err != nil || info.Held {
		t.Errorf("after a panic: %+v, %v; want the lock given back", info, err)
	}
}

func TestRunEndsWithContext(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	a := env.candidate(t, env.m, "a")
	b := env.candidate(t, env.m, "b")
	ta, err := a.Campaign(ctxFor(t))
	require.NoError(t, err)
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
