package leader_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/leader"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
)

// termLog records the term events an Election reports.
type termLog struct{ ch chan string }

func (r termLog) TermStarted(_ context.Context, e observe.TermEvent) {
	r.ch <- e.Election + " " + e.Identity + " started"
}

func (r termLog) TermEnded(_ context.Context, e observe.TermEvent) {
	how := "resigned"
	switch {
	case e.Lost():
		how = "lost"
	case !errors.Is(e.Cause, leader.ErrResigned):
		how = "ended by " + e.Cause.Error()
	}
	r.ch <- e.Election + " " + e.Identity + " " + how
}

// An Election reports each term it wins, and its end: at once for a
// resignation (Resign returns after the report), and for a term lost when
// a renewal finds the lock gone.
func TestObserverTerms(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	r := termLog{ch: make(chan string, 10)}
	a := env.candidate(t, env.m, "a", leader.WithObserver(r))
	want := func(line string) {
		t.Helper()
		if got := recv(t, ctx, r.ch, line); got != line {
			t.Fatalf("event %q, want %q", got, line)
		}
	}
	ta, err := a.Campaign(ctx)
	require.NoError(t, err)
	want(a.Name() + " a started")
	require.NoError(t, ta.Resign(ctx))
	select {
	case got := <-r.ch:
		require.Equal(t, a.Name()+" a resigned", got, "event %q after Resign", got)
	default:
		t.Fatal("Resign returned before the term's end was reported")
	}

	tb, err := a.Campaign(ctx)
	require.NoError(t, err)
	want(a.Name() + " a started")
	env.m.Break(a.Key())
	env.clock.Advance(memRenew)
	<-tb.Done()
	want(a.Name() + " a lost")
	wantIs(t, "Resign", tb.Resign(ctx), lease.ErrNotHeld)
	select {
	case got := <-r.ch:
		t.Fatalf("event %q after the end was reported", got)
	default:
	}
}

// A value that is no TermObserver is refused.
func TestObserverInvalid(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	_, err := leader.New(env.m, "x", leader.WithObserver("not an observer"))
	assert.ErrorIs(t, err, lease.ErrInvalidArgument, "WithObserver(string), want ErrInvalidArgument")
}
