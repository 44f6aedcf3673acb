package renew

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/lease"
)

// 1,200 entries of one group, due together, go out as calls of at most 512
// (512, 512, 176) and each entry's validity moves to the call's start plus
// its TTL, less drift.
func TestBatches(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	g := Group{Node: "a", Slot: 7}
	for i := range 1200 {
		h.add(keyN(i), g)
	}
	h.noCall()
	h.clock.Advance(testInterval)
	var sizes []int
	for range 3 {
		c := h.call()
		require.Equal(t, g, c.group)
		for _, r := range c.reqs {
			require.Equal(t, "tok-"+r.Key, r.Token, "request %+v", r)
			require.Equal(t, testTTL, r.TTL, "request %+v", r)
			require.WithinDuration(t, h.clock.Now(), r.Due, 0, "request %+v", r)
		}
		sizes = append(sizes, len(c.reqs))
		c.renewAll()
	}
	require.ElementsMatch(t, []int{512, 512, 176}, sizes, "call sizes")
	want := h.clock.Now().Add(testTTL - testDrift)
	for k, e := range h.eventsN(1200) {
		require.NoError(t, e.cause, k)
		require.WithinDuration(t, want, e.until, 0, "%s: renewed until", k)
	}
	h.noCall()
	// The next round is due an interval after the calls were sent.
	h.clock.Advance(testInterval - time.Millisecond)
	h.noCall()
	h.clock.Advance(time.Millisecond)
	for range 3 {
		h.call().renewAll()
	}
	h.eventsN(1200)
}

// Entries of different groups (node, slot) or TTLs never share a call.
func TestGroups(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	groups := []Group{{"a", 1}, {"a", 2}, {"b", 1}}
	for i, g := range groups {
		h.add(keyN(2*i), g)
		h.add(keyN(2*i+1), g)
	}
	e := h.entry("other-ttl", groups[0])
	e.TTL, e.ValidUntil = 2*testTTL, h.clock.Now().Add(2*testTTL-testDrift)
	_, err := h.r.Add(e)
	require.NoError(t, err)
	h.clock.Advance(testInterval)
	seen := map[Group]int{}
	for range len(groups) + 1 {
		c := h.call()
		seen[c.group]++
		ttl := c.reqs[0].TTL
		for _, r := range c.reqs {
			require.Equal(t, ttl, r.TTL, "one call with two TTLs")
		}
		if ttl == 2*testTTL {
			require.Equal(t, []string{"other-ttl"}, c.keys(), "call of TTL %v", ttl)
		} else {
			require.Len(t, c.reqs, 2, "call of %v has %v", c.group, c.keys())
		}
		c.renewAll()
	}
	require.Equal(t, map[Group]int{groups[0]: 2, groups[1]: 1, groups[2]: 1}, seen, "calls per group")
	h.eventsN(2*len(groups) + 1)
}

// An entry due within a quarter of its interval after another is renewed
// with it, early, and from then on both share every round's call; one due
// later is not.
func TestEarlyJoin(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	g := Group{Node: "a"}
	h.add("first", g)
	h.clock.Advance(200 * time.Millisecond)
	h.add("joins", g) // due at 1.2 s: within 1 s + 250 ms
	h.clock.Advance(100 * time.Millisecond)
	h.add("later", g) // due at 1.3 s: not within
	h.clock.Advance(700 * time.Millisecond)
	c := h.call()
	require.Equal(t, []string{"first", "joins"}, c.keys(), "first call")
	c.renewAll()
	h.eventsN(2)
	h.clock.Advance(300 * time.Millisecond)
	c = h.call()
	require.Equal(t, []string{"later"}, c.keys(), "second call")
	c.renewAll()
	h.eventsN(1)
	// Next round: "later" (due at 2.3 s) is not within 2 s + 250 ms.
	h.clock.Advance(700 * time.Millisecond)
	c = h.call()
	require.Equal(t, []string{"first", "joins"}, c.keys(), "round 2")
	c.renewAll()
	h.eventsN(2)
	h.noCall()
}

// A grant found gone is reported to its entry alone, at once, with the
// result's cause; the others are renewed, and the lost entry is not
// renewed again.
func TestLostNotHeld(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	g := Group{Node: "a"}
	for i := range 3 {
		h.add(keyN(i), g)
	}
	h.clock.Advance(testInterval)
	c := h.call()
	gone := errors.New("WRONGTYPE: not ours")
	c.byKey(func(key string) Result {
		switch key {
		case keyN(0):
			return Result{Renewed: true}
		case keyN(1):
			return Result{}
		}
		return Result{Err: fmtNotHeld(gone)}
	})
	evs := h.eventsN(3)
	require.NoError(t, evs[keyN(0)].cause, "renewed entry")
	require.ErrorIs(t, evs[keyN(1)].cause, lease.ErrNotHeld, "entry without grant")
	require.ErrorIs(t, evs[keyN(2)].cause, lease.ErrNotHeld, "entry with a cause")
	require.ErrorIs(t, evs[keyN(2)].cause, gone, "entry with a cause")
	require.Equal(t, 1, h.r.Len(), "entries left")
	h.clock.Advance(testInterval)
	require.Equal(t, []string{keyN(0)}, h.call().keys(), "next round renews")
}

func fmtNotHeld(cause error) error { return errors.Join(lease.ErrNotHeld, cause) }

// Renewals that fail are retried, more often as the validity runs out,
// and an entry never confirmed again is reported lost LossLead before its
// ValidUntil, with ErrLeaseExpired and the last error, even while a call
// for it hangs. Its call's context is cancelled then.
func TestLostByExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	h.ignoreCtx = true
	validUntil := h.clock.Now().Add(testTTL - testDrift)
	h.add("k", Group{Node: "a"})
	var tries []time.Duration
	start := h.clock.Now()
	for {
		h.clock.Advance(h.r.nextEvent())
		select {
		case e := <-h.events:
			require.Error(t, e.cause, "renewed: %+v", e)
			require.WithinDuration(t, validUntil.Add(-lease.LossLead(testTTL, testInterval)), e.at, 0,
				"lost LossLead before ValidUntil %v", validUntil)
			require.ErrorIs(t, e.cause, lease.ErrLeaseExpired)
			require.ErrorIs(t, e.cause, errDown, "want the last error")
			require.GreaterOrEqual(t, len(tries), 4, "tries at %v", tries)
			require.Equal(t, testInterval, tries[0], "tries at %v: want the first at the interval", tries)
			for i := 2; i < len(tries); i++ {
				require.Less(t, tries[i]-tries[i-1], tries[i-1]-tries[i-2],
					"tries at %v: want retries closer together as the validity runs out", tries)
			}
			return
		case c := <-h.calls:
			tries = append(tries, h.clock.Now().Sub(start))
			if len(tries) < 4 {
				c.answer(nil, errDown)
				continue
			}
			// The last try hangs: the loss comes from the timer.
			defer func() {
				assert.Error(t, c.ctx.Err(), "the hanging call's context was not cancelled when its entry was lost")
				c.answer(nil, errDown)
			}()
		}
		require.LessOrEqual(t, len(tries), 100, "no loss after 100 tries")
	}
}

// A renewal cut off by its call's bound says nothing of why renewals
// fail: the loss reports the error of the renewal before it (a node
// down, a ReplicaError), not the deadline, whether the call returns the
// deadline itself or as its results' errors (as the Client's does).
func TestLostByExpiryKeepsCause(t *testing.T) {
	t.Parallel()
	for _, perResult := range []bool{false, true} {
		h := newHarness(t, Config{})
		h.ignoreCtx = perResult
		h.add("k", Group{Node: "a"})
		h.clock.Advance(testInterval)
		h.call().answer(nil, errDown)
		h.clock.Advance(h.r.nextEvent())
		c := h.call()
		if perResult {
			<-c.ctx.Done() // its bound, in real time
			c.byKey(func(string) Result { return Result{Err: fmt.Errorf("redislock: %w", c.ctx.Err())} })
		} else { // unanswered: it returns at its bound
			testkit.Recv(t, h.finished, "the call ended at its bound")
		}
		require.ErrorIs(t, c.ctx.Err(), context.DeadlineExceeded, "the call ended at its deadline")
		h.clock.Advance(testTTL)
		e := h.event()
		assert.ErrorIs(t, e.cause, lease.ErrLeaseExpired, "per result %v", perResult)
		assert.ErrorIs(t, e.cause, errDown, "per result %v: want the error before the cut-off", perResult)
		assert.NotErrorIs(t, e.cause, context.DeadlineExceeded, "per result %v: want the error before the cut-off", perResult)
		for len(h.calls) > 0 { // retries that wait for an answer
			(<-h.calls).answer(nil, errDown)
		}
	}
}

// nextEvent is how long until the head of the heap is due (for tests that
// step the fake clock from event to event).
func (r *Renewer) nextEvent() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.heap) == 0 {
		return time.Hour
	}
	return max(r.heap[0].next-r.now(), 0)
}

// A renewal confirmed only after the entry's validity was about to end is
// not a renewal: the entry is lost by expiry.
func TestConfirmedTooLate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	h.ignoreCtx = true
	h.add("k", Group{Node: "a"})
	h.clock.Advance(testInterval)
	c := h.call()
	h.clock.Advance(testTTL) // the call took longer than the validity
	require.ErrorIs(t, h.event().cause, lease.ErrLeaseExpired, "want a loss by expiry")
	c.renewAll() // too late: ignored
	testkit.NoRecv(t, h.events, "a callback after the loss")
}

// A wrong number of results is an error for every entry of the call.
func TestResultCount(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	h.add("a", Group{})
	h.add("b", Group{})
	h.clock.Advance(testInterval)
	h.call().answer([]Result{{Renewed: true}}, nil)
	h.clock.Advance(h.r.nextEvent())
	c := h.call() // retried: no entry was confirmed
	require.Len(t, c.reqs, 2, "the retry of %v", c.keys())
}

// Calls to one node run at most PerNode at a time; a node that hangs does
// not hold up another node's calls.
func TestPerNode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{PerNode: 2})
	for slot := range 5 {
		h.add(keyN(slot), Group{Node: "stalled", Slot: slot})
	}
	h.add("other", Group{Node: "healthy"})
	h.clock.Advance(testInterval)
	var stalled []*fakeCall
	for range 3 { // two of "stalled", one of "healthy"
		c := h.call()
		if c.group.Node == "healthy" {
			c.renewAll()
			e := h.event()
			require.Equal(t, "other", e.key)
			require.NoError(t, e.cause)
			continue
		}
		stalled = append(stalled, c)
	}
	h.noCall()
	require.Len(t, stalled, 2, "calls in flight to one node")
	stalled[0].renewAll()
	h.event()
	stalled = append(stalled[1:], h.call()) // the next one goes out
	for _, c := range stalled {
		c.renewAll()
		h.event()
	}
	for range 2 {
		h.call().renewAll()
		h.event()
	}
}

// Stop takes an entry out of its call: a call whose entries all stopped is
// cancelled, and Stop returns only after the call returned. A stopped
// entry gets no callback and is not renewed again.
func TestStop(t *testing.T) {
	t.Parallel()
	left := make(chan *Handle, 2)
	h := newHarness(t, Config{stopped: func(e *Handle) { left <- e }})
	h.ignoreCtx = true
	a, b := h.add("a", Group{}), h.add("b", Group{})
	h.clock.Advance(testInterval)
	c := h.call()
	var returned atomic.Bool
	stopped := make(chan struct{}, 2)
	stop := func(e *Handle) {
		go func() {
			e.Stop()
			assert.True(t, returned.Load(), "Stop returned while the call was in flight")
			stopped <- struct{}{}
		}()
		<-left
	}
	stop(a)
	require.NoError(t, c.ctx.Err(), "call cancelled while an entry still needs it")
	stop(b)
	testkit.Recv(t, c.ctx.Done(), "call cancelled when its last entry stopped")
	returned.Store(true)
	c.renewAll()
	<-stopped
	<-stopped
	testkit.NoRecv(t, h.events, "a callback of a stopped entry")
	require.Zero(t, h.r.Len(), "entries left")
	h.clock.Advance(10 * testInterval)
	h.noCall()
	a.Stop() // idempotent
}

// An entry stopped while its call waits for a worker is left out of it.
func TestStopQueued(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{PerNode: 1})
	h.add("first", Group{Slot: 1})
	queued := h.add("queued", Group{Slot: 2})
	h.clock.Advance(testInterval)
	c := h.call()
	queued.Stop() // its call is still queued behind c
	c.renewAll()
	h.event()
	h.noCall()
}

// Close cancels the calls in flight, waits for them, and reports nothing;
// Add fails after it.
func TestClose(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	e := h.add("k", Group{})
	h.clock.Advance(testInterval)
	c := h.call()
	h.r.Close()
	require.Error(t, c.ctx.Err(), "call not cancelled by Close")
	testkit.NoRecv(t, h.events, "a callback after Close")
	e.Stop() // after Close: returns at once
	_, err := h.r.Add(h.entry("late", Group{}))
	require.ErrorIs(t, err, ErrClosed, "Add after Close")
	h.r.Close() // idempotent
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, Group, []Request) ([]Result, error) { return nil, nil }
	for _, cfg := range []Config{{}, {Batch: noop, BatchSize: -1}, {Batch: noop, PerNode: -1}, {Batch: noop, Early: 1}} {
		_, err := New(cfg)
		assert.ErrorIs(t, err, lease.ErrInvalidArgument, "New(%+v)", cfg)
	}
	h := newHarness(t, Config{})
	for name, mod := range map[string]func(*Entry){
		"nil Lost":        func(e *Entry) { e.Lost = nil },
		"empty key":       func(e *Entry) { e.Key = "" },
		"TTL below 1ms":   func(e *Entry) { e.TTL = time.Microsecond },
		"no interval":     func(e *Entry) { e.Interval = 0 },
		"interval ≥ TTL":  func(e *Entry) { e.Interval = testTTL },
		"negative drift":  func(e *Entry) { e.Drift = -1 },
		"zero ValidUntil": func(e *Entry) { e.ValidUntil = time.Time{} },
		"owner and Lost":  func(e *Entry) { e.Owner = &funcOwner{lost: e.Lost} },
	} {
		e := h.entry("k", Group{})
		mod(&e)
		_, err := h.r.Add(e)
		assert.ErrorIs(t, err, lease.ErrInvalidArgument, name)
	}
}

// A validity the owner confirmed itself (an explicit Refresh) postpones the
// loss by expiry while the renewals fail.
func TestConfirmed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	e := h.add("k", Group{})
	h.clock.Advance(testInterval)
	h.call().answer(nil, errDown)
	later := h.clock.Now().Add(testTTL - testDrift)
	e.Confirmed(later)
	e.Confirmed(later.Add(-time.Second)) // earlier: ignored
	for {
		h.clock.Advance(h.r.nextEvent())
		select {
		case ev := <-h.events:
			require.Error(t, ev.cause, "want the loss")
			require.WithinDuration(t, later.Add(-lease.LossLead(testTTL, testInterval)), ev.at, 0, "the loss's time")
			return
		case c := <-h.calls:
			c.answer(nil, errDown)
		}
	}
}
