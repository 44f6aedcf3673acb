package renew

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/testkit"
)

// An explicit renewal by the owner (Confirmed) moves the next renewal: it
// is due an interval after that renewal began, not at the old time.
func TestConfirmedMovesRenewal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Early: -1})
	e := h.add("k", Group{})
	h.clock.Advance(testInterval / 2)
	refreshed := h.clock.Now()
	e.Confirmed(refreshed.Add(testTTL - testDrift))
	h.clock.Advance(testInterval / 2) // the old due time
	h.noCall()
	h.clock.Advance(testInterval/2 - time.Millisecond)
	h.noCall()
	h.clock.Advance(time.Millisecond)
	c := h.call()
	require.WithinDuration(t, refreshed.Add(testInterval), c.reqs[0].Due, 0, "renewal due an interval after the refresh")
	c.renewAll()
	h.event()
}

// Remove sends no more renewals and may be called from the entry's own
// callback; a callback decided before it is left to the owner.
func TestRemove(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	var e *Handle
	ent := h.entry("k", Group{})
	renewed := ent.Renewed
	ent.Renewed = func(until time.Time) {
		e.Remove() // from the callback: must not wait for itself
		renewed(until)
	}
	e, err := h.r.Add(ent)
	require.NoError(t, err)
	h.clock.Advance(testInterval)
	h.call().renewAll()
	h.event()
	h.clock.Advance(10 * testInterval)
	h.noCall()
	require.Zero(t, h.r.Len(), "entries after Remove")
	e.Stop() // after Remove: returns at once
}

// CloseLost tells every entry still renewed, once, before it returns, and
// not the ones stopped or lost before.
func TestCloseLost(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	h.add("a", Group{})
	h.add("b", Group{Node: "other"})
	h.add("stopped", Group{}).Stop()
	h.clock.Advance(testInterval)
	pending := h.call() // a call in flight is cancelled
	cause := errors.New("closed")
	h.r.CloseLost(cause)
	require.Error(t, pending.ctx.Err(), "call not cancelled")
	got := h.eventsN(2)
	for _, k := range []string{"a", "b"} {
		require.ErrorIs(t, got[k].cause, cause, "%s: want the loss", k)
	}
	testkit.NoRecv(t, h.events, "a callback beyond the two")
	h.r.CloseLost(cause) // idempotent, tells no one again
	h.r.Close()
}

// A grant that took long to return (its request began half an interval
// before Add) is renewed an interval after its request began, not an
// interval after Add, which could come after its expiry.
func TestAddLateGrant(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Early: -1})
	ent := h.entry("k", Group{})
	began := h.clock.Now().Add(-testInterval / 2)
	ent.ValidUntil = began.Add(testTTL - testDrift)
	_, err := h.r.Add(ent)
	require.NoError(t, err)
	h.clock.Advance(testInterval/2 - time.Millisecond)
	h.noCall()
	h.clock.Advance(time.Millisecond)
	c := h.call()
	require.WithinDuration(t, began.Add(testInterval), c.reqs[0].Due, 0, "renewal due an interval after its request began")
	c.renewAll()
	h.event()
}
