package leader_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/leader"
	"github.com/redislock-go/redislock/lease"
)

// Failovers on leasetest.Memory with the fake clock: a partitioned leader,
// and hundreds of forced failovers.

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
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	la := env.link()
	a := env.candidate(t, la, "a")
	b := env.candidate(t, env.link(), "b")
	ta, err := a.Campaign(ctx)
	require.NoError(t, err)
	won := make(chan *leader.Term, 1)
	go func() {
		tb, err := b.Campaign(ctx)
		assert.NoError(t, err)
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
	require.NoError(t, ta.Err(), "a's term ended %v before its claimed validity", claimed.Sub(env.clock.Now()))
	env.step(live) // past claimed
	select {
	case <-ta.Done():
	default:
		t.Fatal("a's term not over after its ValidUntil")
	}
	wantIs(t, "a's term", ta.Err(), lease.ErrLockLost, lease.ErrLeaseExpired)
	if msg := ta.Err().Error(); strings.Count(msg, "redislock: ") != 1 {
		t.Errorf("a's term's error says redislock more than once: %q", msg)
	}
	assert.True(t, ta.ValidUntil().IsZero(), "ValidUntil after the end: %v", ta.ValidUntil())
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
	assert.True(t, tb.Started().Equal(expiry), "b won %v after a's lease ended; want at its end", tb.Started().Sub(expiry))
	if gap := tb.Started().Sub(claimed); gap < memMargin {
		t.Errorf("a stopped only %v before b won; want at least the margin %v", gap, memMargin)
	}
	assert.Error(t, ta.Resign(ctx), "Resign of a lost term: nil, want its release's error")
	require.NoError(t, tb.Resign(ctx))
}

// Hundreds of forced failovers on the fake clock: each round cuts the
// leader's link, so that its renewals fail, and lets time run to the end of
// its lease. Every round: the old leader's term ends before the new one
// begins, the new one begins exactly when the old lease ends (one lease
// after its last renewal), terms strictly increase, and the fenced sink
// refuses the old leader's late write and never sees two valid leaders.
func TestFailoverStormMemory(t *testing.T) {
	t.Parallel()
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
			require.NoError(t, s.writeAs(cur.term), "round %d: the leader's write", r)
			env.step(leading + waiting)
		}
		claimed := cur.term.ValidUntil()
		expiry := cur.link.lastLock().lastOK().Add(memLease) // the lease on the Memory
		cur.link.cut.Store(true)
		for env.clock.Now().Before(expiry) {
			n := waiting
			if cur.term.Err() == nil {
				n += leading
				require.NoError(t, s.writeAs(cur.term), "round %d: the cut leader's write before its validity ended", r)
			}
			env.step(n)
		}
		next := recv(t, ctx, wins, "the next leader")
		old := cur.term
		require.True(t, next.term.Started().Equal(expiry), "round %d: term %d began %v after the lease of term %d ended; want at its end", r, next.term.Fence(), next.term.Started().Sub(expiry), old.Fence())
		select {
		case <-old.Done():
		default:
			t.Fatalf("round %d: term %d still running when term %d began", r, old.Fence(), next.term.Fence())
		}
		require.False(t, next.term.Started().Before(claimed), "round %d: term %d began %v before term %d's claimed validity ended", r, next.term.Fence(), claimed.Sub(next.term.Started()), old.Fence())
		require.Greater(t, next.term.Fence(), old.Fence(), "round %d: terms %d, %d after %d: must increase", r, old.Fence(), next.term.Fence(), lastTerm)
		require.Greater(t, old.Fence(), lastTerm, "round %d: terms %d, %d after %d: must increase", r, old.Fence(), next.term.Fence(), lastTerm)
		lastTerm = old.Fence()
		require.NoError(t, s.writeAs(next.term), "round %d: the new leader's write", r)
		// The old leader, resumed, still has its fence: the sink refuses it.
		require.ErrorIs(t, s.write(old.Fence(), claimed), lease.ErrStaleFence, "round %d: the old leader's late write, want ErrStaleFence", r)
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
