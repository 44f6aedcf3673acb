package renew

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
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
		if c.group != g {
			t.Fatalf("call for %v, want %v", c.group, g)
		}
		for _, r := range c.reqs {
			if r.Token != "tok-"+r.Key || r.TTL != testTTL || !r.Due.Equal(h.clock.Now()) {
				t.Fatalf("request %+v", r)
			}
		}
		sizes = append(sizes, len(c.reqs))
		c.renewAll()
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{176, 512, 512}) {
		t.Fatalf("call sizes %v, want 512, 512, 176", sizes)
	}
	want := h.clock.Now().Add(testTTL - testDrift)
	for k, e := range h.eventsN(1200) {
		if e.cause != nil || !e.until.Equal(want) {
			t.Fatalf("%s: %+v, want renewed until %v", k, e, want)
		}
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
	if _, err := h.r.Add(e); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(testInterval)
	seen := map[Group]int{}
	for range len(groups) + 1 {
		c := h.call()
		seen[c.group]++
		ttl := c.reqs[0].TTL
		for _, r := range c.reqs {
			if r.TTL != ttl {
				t.Fatalf("one call with TTLs %v and %v", ttl, r.TTL)
			}
		}
		if ttl == 2*testTTL && !slices.Equal(c.keys(), []string{"other-ttl"}) {
			t.Fatalf("call of TTL %v has %v", ttl, c.keys())
		}
		if ttl == testTTL && len(c.reqs) != 2 {
			t.Fatalf("call of %v has %v", c.group, c.keys())
		}
		c.renewAll()
	}
	if seen[groups[0]] != 2 || seen[groups[1]] != 1 || seen[groups[2]] != 1 {
		t.Fatalf("calls per group %v", seen)
	}
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
	if !slices.Equal(c.keys(), []string{"first", "joins"}) {
		t.Fatalf("first call %v, want first and joins", c.keys())
	}
	c.renewAll()
	h.eventsN(2)
	h.clock.Advance(300 * time.Millisecond)
	c = h.call()
	if !slices.Equal(c.keys(), []string{"later"}) {
		t.Fatalf("second call %v, want later", c.keys())
	}
	c.renewAll()
	h.eventsN(1)
	// Next round: "later" (due at 2.3 s) is not within 2 s + 250 ms.
	h.clock.Advance(700 * time.Millisecond)
	c = h.call()
	if !slices.Equal(c.keys(), []string{"first", "joins"}) {
		t.Fatalf("round 2: %v", c.keys())
	}
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
	if evs[keyN(0)].cause != nil {
		t.Fatalf("renewed entry: %+v", evs[keyN(0)])
	}
	if !errors.Is(evs[keyN(1)].cause, lease.ErrNotHeld) {
		t.Fatalf("entry without grant: %v, want ErrNotHeld", evs[keyN(1)].cause)
	}
	if c := evs[keyN(2)].cause; !errors.Is(c, lease.ErrNotHeld) || !errors.Is(c, gone) {
		t.Fatalf("entry with a cause: %v", c)
	}
	if h.r.Len() != 1 {
		t.Fatalf("%d entries left, want 1", h.r.Len())
	}
	h.clock.Advance(testInterval)
	if c := h.call(); !slices.Equal(c.keys(), []string{keyN(0)}) {
		t.Fatalf("next round renews %v", c.keys())
	}
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
			if e.cause == nil {
				t.Fatalf("renewed: %+v", e)
			}
			if want := validUntil.Add(-backend.LossLead(testTTL, testInterval)); !e.at.Equal(want) {
				t.Fatalf("lost at %v, want %v (LossLead before ValidUntil %v)", e.at, want, validUntil)
			}
			if !errors.Is(e.cause, lease.ErrLeaseExpired) || !errors.Is(e.cause, errDown) {
				t.Fatalf("cause %v, want ErrLeaseExpired with the last error", e.cause)
			}
			if len(tries) < 4 || tries[0] != testInterval {
				t.Fatalf("tries at %v: want the first at the interval", tries)
			}
			for i := 2; i < len(tries); i++ {
				if tries[i]-tries[i-1] >= tries[i-1]-tries[i-2] {
					t.Fatalf("tries at %v: want retries closer together as the validity runs out", tries)
				}
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
				select {
				case <-c.ctx.Done():
				default:
					t.Error("the hanging call's context was not cancelled when its entry was lost")
				}
				c.answer(nil, errDown)
			}()
		}
		if len(tries) > 100 {
			t.Fatal("no loss after 100 tries")
		}
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
		} else {
			select { // unanswered: it returns at its bound
			case <-h.finished:
			case <-time.After(bound):
				t.Fatal("the call did not end at its bound")
			}
		}
		if !errors.Is(c.ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("call ended with %v, want its deadline", c.ctx.Err())
		}
		h.clock.Advance(testTTL)
		e := h.event()
		if !errors.Is(e.cause, lease.ErrLeaseExpired) || !errors.Is(e.cause, errDown) || errors.Is(e.cause, context.DeadlineExceeded) {
			t.Errorf("per result %v: cause %v, want ErrLeaseExpired with the error before the cut-off", perResult, e.cause)
		}
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
	if e := h.event(); !errors.Is(e.cause, lease.ErrLeaseExpired) {
		t.Fatalf("event %+v, want a loss by expiry", e)
	}
	c.renewAll() // too late: ignored
	select {
	case e := <-h.events:
		t.Fatalf("callback after the loss: %+v", e)
	default:
	}
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
	if len(c.reqs) != 2 {
		t.Fatalf("retry of %v", c.keys())
	}
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
			if e := h.event(); e.key != "other" || e.cause != nil {
				t.Fatalf("event %+v", e)
			}
			continue
		}
		stalled = append(stalled, c)
	}
	h.noCall()
	if len(stalled) != 2 {
		t.Fatalf("%d calls in flight to one node, want 2", len(stalled))
	}
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
			if !returned.Load() {
				t.Error("Stop returned while the call was in flight")
			}
			stopped <- struct{}{}
		}()
		<-left
	}
	stop(a)
	if c.ctx.Err() != nil {
		t.Fatal("call cancelled while an entry still needs it")
	}
	stop(b)
	select {
	case <-c.ctx.Done(): // no entry needs the call any more
	case <-time.After(bound):
		t.Fatal("call not cancelled when its last entry stopped")
	}
	returned.Store(true)
	c.renewAll()
	<-stopped
	<-stopped
	select {
	case e := <-h.events:
		t.Fatalf("callback of a stopped entry: %+v", e)
	default:
	}
	if h.r.Len() != 0 {
		t.Fatalf("%d entries left", h.r.Len())
	}
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
	if c.ctx.Err() == nil {
		t.Fatal("call not cancelled by Close")
	}
	select {
	case ev := <-h.events:
		t.Fatalf("callback after Close: %+v", ev)
	default:
	}
	e.Stop() // after Close: returns at once
	if _, err := h.r.Add(h.entry("late", Group{})); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close = %v", err)
	}
	h.r.Close() // idempotent
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, Group, []Request) ([]Result, error) { return nil, nil }
	for _, cfg := range []Config{{}, {Batch: noop, BatchSize: -1}, {Batch: noop, PerNode: -1}, {Batch: noop, Early: 1}} {
		if _, err := New(cfg); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v", cfg, err)
		}
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
		if _, err := h.r.Add(e); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("%s: Add = %v", name, err)
		}
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
			if want := later.Add(-backend.LossLead(testTTL, testInterval)); !ev.at.Equal(want) || ev.cause == nil {
				t.Fatalf("event %+v, want the loss at %v", ev, want)
			}
			return
		case c := <-h.calls:
			c.answer(nil, errDown)
		}
	}
}
