package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// Term is one term of leadership: the lock an Election won, renewed in the
// background (lease.Hold) until Resign or until it is lost. Its methods are
// safe for concurrent use.
//
// Its Context is cancelled when the term ends: at Resign, when a renewal
// finds the lock gone, or when no renewal has got through by ValidUntil
// (the validity the lock last confirmed, less the margin), which is before
// the lease can end on the backend and so before another candidate can
// win. Work done as the leader must stop when it is cancelled, and must
// send Fence with every write to the resources it shares with other
// leaders, which refuse fences below the newest they have seen: a leader
// paused past its lease (GC, SIGSTOP, a slow network) cannot know that its
// term is over, and only the resource can refuse its late writes.
type Term struct {
	e      *Election
	held   *lease.Held
	start  time.Time
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	watchdog lease.Timer // guarded by mu: fires at ValidUntil; nil with no margin
	over     bool        // guarded by mu: the term has ended

	resignOnce sync.Once
	resignErr  error
	reported   chan struct{} // with observers: closed once they were told the term ended
}

// newTerm holds l and returns the term, or nil (with l released) when the
// grant's validity less the margin had already passed.
func (e *Election) newTerm(ctx context.Context, l lease.Lock) (*Term, error) {
	held, err := lease.Hold(context.WithoutCancel(ctx), l, e.o.lease, lease.WithRefreshInterval(e.o.renew))
	if err != nil {
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	t := &Term{e: e, held: held, start: e.o.clock.Now()}
	t.ctx, t.cancel = context.WithCancelCause(held.Context())
	left := t.left()
	if left <= 0 {
		_ = held.Release(context.WithoutCancel(ctx))
		t.cancel(ErrResigned)
		return nil, nil
	}
	t.observe(ctx)
	if e.o.margin > 0 {
		t.mu.Lock()
		t.watchdog = e.o.clock.AfterFunc(left, t.check)
		t.mu.Unlock()
	}
	return t, nil
}

// left is the time until ValidUntil; <= 0 when it has passed or the lock
// is known not to be held.
func (t *Term) left() time.Duration {
	vu := t.held.Lock().ValidUntil()
	if vu.IsZero() {
		return 0
	}
	return vu.Add(-t.e.o.margin).Sub(t.e.o.clock.Now())
}

// check runs at ValidUntil: unless a renewal has moved it since, the term
// is over; its renewals stop and its lock is given back.
func (t *Term) check() {
	t.mu.Lock()
	if t.over {
		t.mu.Unlock()
		return
	}
	if left := t.left(); left > 0 && t.ctx.Err() == nil {
		t.watchdog.Reset(left)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.end(lease.Join(lease.ErrLockLost, fmt.Errorf("%w: none by the margin of %v before the lease's end",
		lease.ErrLeaseExpired, t.e.o.margin)))
	_ = t.release(context.Background())
}

// end cancels the term's context with cause (unless it ended before) and
// stops the watchdog.
func (t *Term) end(cause error) {
	t.mu.Lock()
	t.over = true
	if t.watchdog != nil {
		t.watchdog.Stop()
	}
	t.mu.Unlock()
	t.cancel(cause)
}

// release stops the renewals and gives the lock back, once.
func (t *Term) release(ctx context.Context) error {
	t.resignOnce.Do(func() {
		t.resignErr = t.held.Release(ctx)
		t.e.ended(t)
		if t.reported != nil {
			<-t.reported // the context ended before: end or a loss
		}
	})
	return t.resignErr
}

// Fence returns the term's number: the fence of its lock, greater than
// every earlier term's of the election. Send it with the leader's writes.
func (t *Term) Fence() int64 { return t.held.Lock().Fence() }

// Identity returns the identity of the leader of this term.
func (t *Term) Identity() string { return t.e.o.holder }

// Started returns when the term began: when Campaign got the lock.
func (t *Term) Started() time.Time { return t.start }

// ValidUntil returns the time until which the term is valid as its lock
// last confirmed (the lock's validity less the margin); the zero Time once
// the term has ended. A renewal moves it forward.
func (t *Term) ValidUntil() time.Time {
	if t.ctx.Err() != nil {
		return time.Time{}
	}
	vu := t.held.Lock().ValidUntil()
	if vu.IsZero() {
		return vu
	}
	return vu.Add(-t.e.o.margin)
}

// Context returns a context cancelled when the term ends (see Term); its
// cause tells why: ErrResigned, or an error matching lease.ErrLockLost.
func (t *Term) Context() context.Context { return t.ctx }

// Done is closed when the term ends.
func (t *Term) Done() <-chan struct{} { return t.ctx.Done() }

// Err returns nil while the term lasts; after that why it ended:
// ErrResigned after Resign, or an error matching lease.ErrLockLost when
// it was lost.
func (t *Term) Err() error {
	if t.ctx.Err() == nil {
		return nil
	}
	return context.Cause(t.ctx)
}

// lost returns the cause of a loss, or nil if the term was not lost.
func (t *Term) lost() error {
	if cause := context.Cause(t.ctx); errors.Is(cause, lease.ErrLockLost) {
		return cause
	}
	return nil
}

// Resign ends the term: it cancels the Context, stops the renewals and
// gives the lock back, which wakes the waiting candidates on a backend that
// notifies (redislock in single mode, leasetest.Memory). Stop the leader's
// work first: Resign does not wait for it (Run does). It returns nil when
// the lock was given back, an error matching lease.ErrNotHeld when the
// term had been lost already, or the backend's error; later calls return
// the first call's result. The release runs even after ctx was cancelled
// (see lease.Lock.Release).
func (t *Term) Resign(ctx context.Context) error {
	t.end(ErrResigned)
	return t.release(ctx)
}
