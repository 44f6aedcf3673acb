package nodes

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// A direct call's bound, on a node whose go-redis client applies context
// deadlines: the call runs on a context whose deadline is at most its
// timeout away. go-redis puts that deadline on the socket, and ends its
// waits for a pool connection and between retries when the context's Done
// channel closes, so the context must end at the deadline, not just carry
// it. context.WithTimeout does that at five allocations and a new timer
// per call; withDeadline spares what it can:
//
//   - a ctx whose own deadline comes first is the bound already;
//   - a ctx that cannot end (context.Background(), a Detach) gets a
//     deadlineCtx: two allocations, its timer taken from a pool;
//   - a ctx that can end before then gets context.WithDeadline, which
//     also ends it with ctx.

// withDeadline returns ctx bounded to end by now+timeout; once the call
// has returned, the caller ends it: dc.end() where dc is not nil, else
// cancel() where that is not nil (a method value would cost an
// allocation).
func withDeadline(ctx context.Context, timeout time.Duration) (_ context.Context, cancel context.CancelFunc, dc *deadlineCtx) {
	d := time.Now().Add(timeout)
	if cd, ok := ctx.Deadline(); ok && !cd.After(d) {
		return ctx, nil, nil
	}
	if ctx.Done() != nil {
		ctx, cancel = context.WithDeadline(ctx, d)
		return ctx, cancel, nil
	}
	dc = &deadlineCtx{parent: ctx, deadline: d, done: make(chan struct{})}
	dc.arm(timeout)
	return dc, nil, dc
}

// deadlineCtx is a context that ends at its deadline, or when the call it
// bounds has returned, on a parent that cannot end (Done is nil): it keeps
// the parent's values. It allocates nothing beyond itself and its Done
// channel: its timer comes from a pool.
type deadlineCtx struct {
	parent   context.Context // Done() == nil
	deadline time.Time
	done     chan struct{}
	state    atomic.Int32 // live, expired or ended; done is closed once it is not live
	slot     *timerSlot

	mu     sync.Mutex         // guards after
	after  context.Context    // AfterFunc's: a plain context that ends with this one; nil until then
	cancel context.CancelFunc // after's
}

// deadlineCtx states.
const (
	live int32 = iota
	expired
	ended
)

// timerSlot is a pooled timer and the context it is set to end.
type timerSlot struct {
	t   *time.Timer
	ctx atomic.Pointer[deadlineCtx]
}

var timerSlots = sync.Pool{New: func() any {
	s := &timerSlot{}
	s.t = time.AfterFunc(time.Hour, s.fire)
	s.t.Stop()
	return s
}}

func (s *timerSlot) fire() {
	if c := s.ctx.Load(); c != nil {
		c.finish(expired)
	}
}

// arm sets a pooled timer to end c in d.
func (c *deadlineCtx) arm(d time.Duration) {
	s := timerSlots.Get().(*timerSlot)
	s.ctx.Store(c)
	c.slot = s
	s.t.Reset(d)
}

// end ends c once its call has returned: Done closes, Err is
// context.Canceled (unless the deadline passed first). Its timer goes
// back to the pool unless it has fired (its function may be running).
func (c *deadlineCtx) end() {
	if s := c.slot; s.t.Stop() {
		s.ctx.Store(nil)
		timerSlots.Put(s)
	}
	c.finish(ended)
}

// finish moves c from live to state, closing done; a later finish does
// nothing.
func (c *deadlineCtx) finish(state int32) {
	if !c.state.CompareAndSwap(live, state) {
		return
	}
	close(c.done)
	c.mu.Lock()
	if c.cancel != nil {
		c.cancel()
	}
	c.mu.Unlock()
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.done }
func (c *deadlineCtx) Value(key any) any           { return c.parent.Value(key) }

func (c *deadlineCtx) Err() error {
	switch c.state.Load() {
	case expired:
		return context.DeadlineExceeded
	case ended:
		return context.Canceled
	}
	return nil
}

// AfterFunc runs f in a goroutine of its own once c ends (the method
// context.AfterFunc and contexts derived from c use, instead of a
// goroutine each that waits for Done); stop unregisters f.
func (c *deadlineCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.after == nil {
		c.after, c.cancel = context.WithCancel(context.Background())
		if c.state.Load() != live {
			c.cancel()
		}
	}
	after := c.after
	c.mu.Unlock()
	return context.AfterFunc(after, f)
}

func (c *deadlineCtx) String() string {
	return fmt.Sprintf("%v.WithDeadline(%s)", c.parent, c.deadline)
}
