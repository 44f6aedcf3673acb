package wake_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/wake"
)

// The queue of a channel's waiters, on a local Waker (no connection): only
// Notify wakes them, so each test sees every wake-up it causes.

// wokenSet names the waiters of subs that are woken now, consuming their
// wake-ups.
func wokenSet(subs map[string]*wake.Sub[none, none]) []string {
	var names []string
	for _, name := range []string{"a", "b", "c", "d"} {
		if s := subs[name]; s != nil && woken(s) {
			names = append(names, name)
		}
	}
	return names
}

// A release wakes one waiter of the client, not all: the longest-waiting
// one that is not awake already; a release that names a ticket wakes the
// waiter of that ticket first.
func TestNotifyWakesOneInArrivalOrder(t *testing.T) {
	t.Parallel()
	w := wake.NewLocal[none, none]()
	defer w.Close()
	subs := map[string]*wake.Sub[none, none]{}
	for _, name := range []string{"a", "b", "c"} {
		subs[name] = w.Add("ch", "t-"+name, none{}, false)
		require.True(t, subs[name].Local(), "waiter %s on a local Waker: Local", name)
		require.True(t, subs[name].Joined(), "waiter %s on a local Waker: Joined", name)
	}
	n, ready := w.Waiting("ch")
	require.Equal(t, 3, n, "Waiting")
	require.True(t, ready, "Waiting: ready")
	w.Notify("ch", "")
	w.Notify("ch", "")
	require.Equal(t, []string{"a", "b"}, wokenSet(subs), "two releases woke")
	w.Notify("ch", "t-c")
	require.Equal(t, []string{"c"}, wokenSet(subs), "a release naming c's ticket woke")
	w.Notify("other", "")
	require.Empty(t, wokenSet(subs), "a release on another channel woke")
	for _, s := range subs {
		s.Stop()
	}
	n, _ = w.Waiting("ch")
	require.Zero(t, n, "waiters after every one left")
}

// A waiter that was woken and leaves without trying passes its wake-up on
// to the next waiter that is not awake; one that leaves unwoken does not.
func TestStopPassesWakeUpOn(t *testing.T) {
	t.Parallel()
	w := wake.NewLocal[none, none]()
	defer w.Close()
	subs := map[string]*wake.Sub[none, none]{}
	for _, name := range []string{"a", "b", "c"} {
		subs[name] = w.Add("ch", "", none{}, false)
	}
	subs["c"].Stop() // unwoken: nothing to pass on
	require.Empty(t, wokenSet(subs), "an unwoken waiter's leaving woke")
	delete(subs, "c")
	w.Notify("ch", "")
	subs["a"].Stop() // woken, leaving without reading its wake-up
	delete(subs, "a")
	require.Equal(t, []string{"b"}, wokenSet(subs), "a woken waiter that left passed its wake-up to")
	subs["b"].Stop()
	subs["b"].Stop() // safe twice
}

// Behind tells a waiter whether an earlier one still waits: the head of
// the queue is not behind, the others are until those before them leave.
func TestBehind(t *testing.T) {
	t.Parallel()
	w := wake.NewLocal[none, none]()
	defer w.Close()
	a := w.Add("ch", "", none{}, false)
	b := w.Add("ch", "", none{}, false)
	require.False(t, a.Behind(), "the head is behind")
	require.True(t, b.Behind(), "the second is not behind")
	a.Stop()
	require.False(t, b.Behind(), "the only waiter left is behind")
	b.Stop()
}

// A handoff goes to the longest-waiting waiter that takes handoffs and is
// not taking one already: Claim picks it, Deliver hands it the grant and
// wakes it, Take gives the grant once. A refused delivery leaves the
// waiter free to be claimed again.
func TestHandoffClaimDeliverTake(t *testing.T) {
	t.Parallel()
	w := wake.NewLocal[string, int]()
	defer w.Close()
	plain := w.Add("ch", "", "plain", false)
	a := w.Add("ch", "", "a's request", true)
	b := w.Add("ch", "", "b's request", true)
	s, req := w.Claim("ch")
	require.Same(t, a, s, "Claim picked %q, want a's request (the first that takes handoffs)", req)
	require.Equal(t, "a's request", req)
	s, req = w.Claim("ch")
	require.Same(t, b, s, "second Claim picked %q, want b's (a is claimed)", req)
	require.Equal(t, "b's request", req)
	s, _ = w.Claim("ch")
	require.Nil(t, s, "a third Claim found a waiter: every one that takes handoffs is claimed")
	_, ok := a.Take()
	require.False(t, ok, "Take before a delivery returned a grant")
	require.True(t, w.Deliver(a, 7, true), "Deliver to a waiting waiter was not taken")
	require.True(t, woken(a), "the delivery did not wake its waiter")
	g, ok := a.Take()
	require.True(t, ok, "Take after a delivery")
	require.Equal(t, 7, g, "Take after a delivery")
	_, ok = a.Take()
	require.False(t, ok, "a grant was taken twice")
	require.False(t, w.Deliver(b, 8, false), "a refused delivery (ok false) was taken")
	s, _ = w.Claim("ch")
	require.Same(t, a, s, "after its grant was taken, a was not free to be claimed again")
	s, _ = w.Claim("ch")
	require.Same(t, b, s, "after a refused delivery, b was not free to be claimed again")
	plain.Stop()
	a.Stop()
	b.Stop()
}

// A waiter that leaves with a grant handed to it and not taken returns it
// (the caller gives it back); a delivery to a waiter that left is not
// taken, and the releaser keeps the grant.
func TestHandoffToLeaver(t *testing.T) {
	t.Parallel()
	w := wake.NewLocal[none, int]()
	defer w.Close()
	a := w.Add("ch", "", none{}, true)
	b := w.Add("ch", "", none{}, true)
	s, _ := w.Claim("ch")
	require.Same(t, a, s, "Claim did not pick a")
	w.Deliver(a, 1, true)
	g, ok := a.Stop()
	require.True(t, ok, "Stop of a waiter with a grant not taken")
	require.Equal(t, 1, g, "Stop of a waiter with a grant not taken")
	_, ok = a.Stop()
	require.False(t, ok, "a second Stop returned the grant again")
	s, _ = w.Claim("ch")
	require.Same(t, b, s, "Claim did not pick b")
	b.Stop()
	require.False(t, w.Deliver(b, 2, true), "a delivery to a waiter that left was taken")
}

// After Close, Add registers nobody.
func TestAddAfterClose(t *testing.T) {
	t.Parallel()
	w := wake.NewLocal[none, none]()
	w.Close()
	w.Close() // safe twice
	require.Nil(t, w.Add("ch", "", none{}, false), "Add after Close returned a waiter")
}
