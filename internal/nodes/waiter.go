package nodes

import (
	"context"
	"sync"
	"time"
)

// waiter is the context a deferred call waits with (AutoFuture's
// WaitContext): done when its parent, the caller's ctx, ends or the call's
// timeout passes, whichever comes first; its values are the parent's. It
// is reused: its timer is made once, its channel again only after it was
// closed, so that a call that gets its reply in time costs no allocation
// and, on a parent that cannot end, no registration with it. One whose
// timer or parent's callback might still run once it is disarmed is not
// reused (disarm).
type waiter struct {
	parent context.Context
	t      *time.Timer // runs onTimer; made on first use
	timing bool        // t was started for this use
	stop   func() bool // context.AfterFunc's stop, for a parent that can end
	cancel func()      // w.onCancel, made once

	mu          sync.Mutex
	ch          chan struct{} // closed when done
	armed       bool          // guarded by mu
	err         error         // guarded by mu: why ch was closed
	timerFired  bool          // guarded by mu: onTimer ran for this use
	cancelFired bool          // guarded by mu: onCancel ran for this use
}

var _ context.Context = (*waiter)(nil)

// arm starts a use: done at parent's end or after timeout (0: parent's
// end alone).
func (w *waiter) arm(parent context.Context, timeout time.Duration) {
	w.parent = parent
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	w.armed = true // nothing else runs yet: no callback is pending
	if timeout > 0 {
		if w.t == nil {
			w.t = time.AfterFunc(timeout, w.onTimer)
		} else {
			w.t.Reset(timeout)
		}
		w.timing = true
	}
	if parent.Done() != nil {
		if w.cancel == nil {
			w.cancel = w.onCancel
		}
		w.stop = context.AfterFunc(parent, w.cancel)
	}
}

// disarm ends a use and reports whether w may be used again: no callback
// of this use can still run.
func (w *waiter) disarm() (reuse bool) {
	timerStopped := !w.timing || w.t.Stop()
	cancelStopped := w.stop == nil || w.stop()
	w.mu.Lock()
	w.armed = false
	reuse = (timerStopped || w.timerFired) && (cancelStopped || w.cancelFired)
	if w.err != nil {
		w.ch = nil // closed: a new one next time
	}
	w.err, w.timerFired, w.cancelFired, w.parent = nil, false, false, nil
	w.mu.Unlock()
	w.stop, w.timing = nil, false
	return reuse
}

func (w *waiter) onTimer() { w.fire(&w.timerFired, context.DeadlineExceeded) }

func (w *waiter) onCancel() {
	w.mu.Lock()
	parent := w.parent
	w.mu.Unlock()
	if parent != nil {
		w.fire(&w.cancelFired, parent.Err())
	}
}

// fire closes ch with err, if w is still armed and not yet done.
func (w *waiter) fire(ran *bool, err error) {
	w.mu.Lock()
	*ran = true
	if w.armed && w.err == nil {
		w.err = err
		close(w.ch)
	}
	w.mu.Unlock()
}

// Deadline reports none: a waiter is only WaitContext's, which looks at
// Done and Err alone.
func (w *waiter) Deadline() (time.Time, bool) { return time.Time{}, false }
func (w *waiter) Done() <-chan struct{}       { return w.ch }

func (w *waiter) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *waiter) Value(key any) any {
	w.mu.Lock()
	parent := w.parent
	w.mu.Unlock()
	if parent == nil {
		return nil
	}
	return parent.Value(key)
}
