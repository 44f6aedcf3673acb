package wake_test

import (
	"slices"
	"testing"

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
		if !subs[name].Local() || !subs[name].Joined() {
			t.Fatalf("waiter %s on a local Waker: Local %v, Joined %v", name, subs[name].Local(), subs[name].Joined())
		}
	}
	if n, ready := w.Waiting("ch"); n != 3 || !ready {
		t.Fatalf("Waiting: %d ready %v, want 3 ready", n, ready)
	}
	w.Notify("ch", "")
	w.Notify("ch", "")
	if got := wokenSet(subs); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("two releases woke %v, want [a b]", got)
	}
	w.Notify("ch", "t-c")
	if got := wokenSet(subs); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("a release naming c's ticket woke %v, want [c]", got)
	}
	w.Notify("other", "")
	if got := wokenSet(subs); len(got) != 0 {
		t.Fatalf("a release on another channel woke %v", got)
	}
	for _, s := range subs {
		s.Stop()
	}
	if n, _ := w.Waiting("ch"); n != 0 {
		t.Fatalf("%d waiters after every one left", n)
	}
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
	if got := wokenSet(subs); len(got) != 0 {
		t.Fatalf("an unwoken waiter's leaving woke %v", got)
	}
	delete(subs, "c")
	w.Notify("ch", "")
	subs["a"].Stop() // woken, leaving without reading its wake-up
	delete(subs, "a")
	if got := wokenSet(subs); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("a woken waiter that left passed its wake-up to %v, want [b]", got)
	}
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
	if a.Behind() || !b.Behind() {
		t.Fatalf("Behind: a %v b %v, want false true", a.Behind(), b.Behind())
	}
	a.Stop()
	if b.Behind() {
		t.Fatal("the only waiter left is behind")
	}
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
	if s != a || req != "a's request" {
		t.Fatalf("Claim picked %q, want a's request (the first that takes handoffs)", req)
	}
	if s2, req2 := w.Claim("ch"); s2 != b || req2 != "b's request" {
		t.Fatalf("second Claim picked %q, want b's (a is claimed)", req2)
	}
	if s3, _ := w.Claim("ch"); s3 != nil {
		t.Fatal("a third Claim found a waiter: every one that takes handoffs is claimed")
	}
	if _, ok := a.Take(); ok {
		t.Fatal("Take before a delivery returned a grant")
	}
	if !w.Deliver(a, 7, true) {
		t.Fatal("Deliver to a waiting waiter was not taken")
	}
	select {
	case <-a.Wake():
	default:
		t.Fatal("the delivery did not wake its waiter")
	}
	if g, ok := a.Take(); !ok || g != 7 {
		t.Fatalf("Take: %d %v, want 7 true", g, ok)
	}
	if _, ok := a.Take(); ok {
		t.Fatal("a grant was taken twice")
	}
	if w.Deliver(b, 8, false) {
		t.Fatal("a refused delivery (ok false) was taken")
	}
	if s4, _ := w.Claim("ch"); s4 != a {
		t.Fatal("after its grant was taken, a was not free to be claimed again")
	}
	if s5, _ := w.Claim("ch"); s5 != b {
		t.Fatal("after a refused delivery, b was not free to be claimed again")
	}
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
	if s, _ := w.Claim("ch"); s != a {
		t.Fatal("Claim did not pick a")
	}
	w.Deliver(a, 1, true)
	if g, ok := a.Stop(); !ok || g != 1 {
		t.Fatalf("Stop of a waiter with a grant not taken: %d %v, want 1 true", g, ok)
	}
	if _, ok := a.Stop(); ok {
		t.Fatal("a second Stop returned the grant again")
	}
	if s, _ := w.Claim("ch"); s != b {
		t.Fatal("Claim did not pick b")
	}
	b.Stop()
	if w.Deliver(b, 2, true) {
		t.Fatal("a delivery to a waiter that left was taken")
	}
}

// After Close, Add registers nobody.
func TestAddAfterClose(t *testing.T) {
	t.Parallel()
	w := wake.NewLocal[none, none]()
	w.Close()
	w.Close() // safe twice
	if s := w.Add("ch", "", none{}, false); s != nil {
		t.Fatal("Add after Close returned a waiter")
	}
}
