package leasetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// FakeClock is a lease.Clock that moves only when told to: Advance runs the
// timers that come due, in time order, so that code built on locks can be
// tested without sleeping. It is safe for concurrent use.
//
// A goroutine that a timer's function wakes runs while Advance goes on: if
// it then sets a timer of its own, it may read Now after Advance moved
// past the time it was woken at, and its timer comes due later than it
// would on a real clock. Advance in steps no longer than the shortest wait
// of the code under test, after WaitTimers shows that it waits.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	seq     int
	timers  []*fakeTimer // pending, in no order
	changed sync.Cond    // broadcast when a timer is added (WaitTimers)
	running sync.WaitGroup
}

// NewFakeClock returns a clock set to start (the zero Time: 2026-01-01 UTC).
func NewFakeClock(start time.Time) *FakeClock {
	if start.IsZero() {
		start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	c := &FakeClock{now: start}
	c.changed.L = &c.mu
	return c
}

var _ lease.Clock = (*FakeClock)(nil)

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc calls f in its own goroutine when the clock has been advanced by
// d or more.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) lease.Timer {
	t := &fakeTimer{c: c, f: f}
	t.Reset(d)
	return t
}

// Advance moves the clock forward by d, firing every timer that comes due on
// the way in time order, each at its own time, and waits until their
// functions have returned. Functions that set new timers due within d see
// them fired too.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		t := c.next(end)
		if t == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		c.now = t.when
		c.remove(t)
		c.running.Add(1)
		c.mu.Unlock()
		go func() {
			defer c.running.Done()
			t.f()
		}()
		c.running.Wait()
	}
}

// WaitTimers blocks until at least n timers are pending: goroutines under
// test have reached the point where they wait on the clock.
func (c *FakeClock) WaitTimers(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n {
		c.changed.Wait()
	}
}

// AwaitTimers is WaitTimers bounded for a test: it fails tb when n timers
// are not pending within d, real time (a goroutine under test is stuck or
// gone). It must be called from the test's goroutine.
func (c *FakeClock) AwaitTimers(tb testing.TB, n int, d time.Duration) {
	tb.Helper()
	done := make(chan struct{})
	go func() {
		c.WaitTimers(n)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		tb.Fatalf("%d timers pending on the fake clock after %v, want %d: a goroutine under test is stuck or gone", c.Timers(), d, n)
	}
}

// Timers returns how many timers are pending.
func (c *FakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// next returns the earliest pending timer due by end, or nil.
func (c *FakeClock) next(end time.Time) *fakeTimer {
	var first *fakeTimer
	for _, t := range c.timers {
		if !t.when.After(end) && (first == nil || t.when.Before(first.when) || t.when.Equal(first.when) && t.seq < first.seq) {
			first = t
		}
	}
	return first
}

func (c *FakeClock) remove(t *fakeTimer) bool {
	i := slices.Index(c.timers, t)
	if i < 0 {
		return false
	}
	c.timers = slices.Delete(c.timers, i, i+1)
	return true
}

type fakeTimer struct {
	c    *FakeClock
	f    func()
	when time.Time // guarded by c.mu
	seq  int       // guarded by c.mu: order among timers due at one time
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.remove(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	pending := c.remove(t)
	c.seq++
	t.when, t.seq = c.now.Add(d), c.seq
	c.timers = append(c.timers, t)
	c.changed.Broadcast()
	return pending
}
