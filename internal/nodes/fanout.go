package nodes

import (
	"sync"
	"time"
)

// Reply is one node's answer to a call.
type Reply[T any] struct {
	Node int
	Val  T
	Err  error
}

// Round is one operation sent to every node of a quorum at once. The caller
// gathers replies until it can decide (Gather), then stops (Stop): replies
// that arrive after that are handed to a late handler, so that no task ever
// waits for another to settle them.
type Round[T any] struct {
	to []*Node       // the nodes it was sent to
	ch chan Reply[T] // buffered to the node count: a sender never waits

	mu      sync.Mutex
	stopped bool           // guarded by mu
	late    func(Reply[T]) // guarded by mu
}

// Fanout runs call on every node in parallel on the live pool and returns
// the round. A node that already has MaxLive fan-out calls in flight, or a
// pool without a free worker, answers ErrBusy at once.
func Fanout[T any](live *Pool, ns []*Node, call func(n *Node) (T, error)) *Round[T] {
	r := &Round[T]{to: ns, ch: make(chan Reply[T], len(ns))}
	for _, n := range ns {
		if !admit(&n.fanned, MaxLive) {
			r.deliver(Reply[T]{Node: n.Index, Err: ErrBusy})
			continue
		}
		task := func() {
			v, err := call(n)
			n.fanned.Add(-1)
			r.deliver(Reply[T]{Node: n.Index, Val: v, Err: err})
		}
		if !live.TryGo(task) {
			n.fanned.Add(-1)
			r.deliver(Reply[T]{Node: n.Index, Err: ErrBusy})
		}
	}
	return r
}

func (r *Round[T]) deliver(rep Reply[T]) {
	r.mu.Lock()
	if !r.stopped {
		r.ch <- rep
		r.mu.Unlock()
		return
	}
	late := r.late
	r.mu.Unlock()
	if late != nil {
		late(rep)
	}
}

// Gather reads replies until stop (called with each) says so, every node
// has answered, or timeout has passed, whichever comes first; it does not
// depend on go-redis honouring a context deadline. It returns the replies
// in arrival order and the nodes not heard from.
func (r *Round[T]) Gather(timeout time.Duration, stop func(Reply[T]) bool) (rs []Reply[T], missing []int) {
	n := cap(r.ch)
	rs = make([]Reply[T], 0, n)
	timer := timers.Get().(*time.Timer)
	timer.Reset(timeout)
	defer func() {
		timer.Stop()
		timers.Put(timer)
	}()
loop:
	for len(rs) < n {
		select {
		case rep := <-r.ch:
			rs = append(rs, rep)
			if stop != nil && stop(rep) {
				break loop
			}
		case <-timer.C:
			break loop
		}
	}
	if len(rs) == n {
		return rs, nil
	}
next:
	for _, node := range r.to {
		for _, rep := range rs {
			if rep.Node == node.Index {
				continue next
			}
		}
		missing = append(missing, node.Index)
	}
	return rs, missing
}

// Stop ends the caller's gathering. Every reply not gathered yet, whether
// it is already waiting or arrives later, is passed to late (nil: dropped):
// those already waiting at once on this goroutine, the others on the
// goroutine of the call that brought them. late must not block: it hands
// any work of its own to a pool (Node.Background).
func (r *Round[T]) Stop(late func(Reply[T])) {
	r.mu.Lock()
	r.stopped, r.late = true, late
	var waiting []Reply[T]
	for len(r.ch) > 0 {
		waiting = append(waiting, <-r.ch)
	}
	r.mu.Unlock()
	if late != nil {
		for _, rep := range waiting {
			late(rep)
		}
	}
}

// timers are stopped timers for Gather.
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}
