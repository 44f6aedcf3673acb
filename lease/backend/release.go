package backend

import (
	"slices"
	"sync"

	"github.com/redislock-go/redislock/lease"
)

// Keeper is lease.Keeper: a Lock that renews its lease itself, found by
// lease.Hold and lease.Run with a type assertion. It is defined in package
// lease, whose Hold needs it, and named here too, in the kit.
type Keeper = lease.Keeper

// Refresher is lease.Refresher: the Keeper of a Lock that renews it by
// Refresh on a timer. It is defined in package lease, whose Hold needs
// it, and named here too, in the kit.
type Refresher = lease.Refresher

// ReleaseWatch lets a Lock's Release end the Keeps under way at once, as
// lease.Keeper says: a backend's Lock holds one, its Keep goes through the
// watch's Keep, and its Release calls Released first. The zero value is
// ready to use; it must not be copied after first use.
type ReleaseWatch struct {
	mu       sync.Mutex
	released bool         // guarded by mu: Released was called
	keeps    []*watchKeep // guarded by mu: the Keeps under way
}

// watchKeep is one Keep under way: its lost, called at most once, and
// never after its stop returned.
type watchKeep struct {
	mu      sync.Mutex
	done    bool           // guarded by mu: lost was called, or the Keep stopped
	running sync.WaitGroup // a call of lost under way
	lost    func(cause error)
}

func (k *watchKeep) report(cause error) {
	k.mu.Lock()
	if k.done {
		k.mu.Unlock()
		return
	}
	k.done = true
	k.running.Add(1)
	k.mu.Unlock()
	defer k.running.Done()
	k.lost(cause) // outside mu: it may release the Lock
}

// stop ends the reports and waits for one under way.
func (k *watchKeep) stop() {
	k.mu.Lock()
	k.done = true
	k.mu.Unlock()
	k.running.Wait()
}

// Keep runs keep, a Keeper's renewal, with a lost that Released calls (with
// lease.ErrReleased) and that reports at most once, never after the stop
// it returns. Keep of a Lock already released reports ErrReleased at once
// and renews nothing.
func (w *ReleaseWatch) Keep(lost func(cause error), keep func(lost func(cause error)) (stop func())) (stop func()) {
	k := &watchKeep{lost: lost}
	w.mu.Lock()
	released := w.released
	if !released {
		w.keeps = append(w.keeps, k)
	}
	w.mu.Unlock()
	if released {
		k.report(lease.ErrReleased)
		return func() {}
	}
	inner := keep(k.report)
	return func() {
		k.stop()
		w.mu.Lock()
		w.keeps = slices.DeleteFunc(w.keeps, func(o *watchKeep) bool { return o == k })
		w.mu.Unlock()
		inner()
	}
}

// Released tells the Keeps under way, and those to come, that the Lock's
// Release was called (see lease.Keeper).
func (w *ReleaseWatch) Released() {
	w.mu.Lock()
	w.released = true
	keeps := w.keeps
	w.keeps = nil
	w.mu.Unlock()
	for _, k := range keeps {
		k.report(lease.ErrReleased)
	}
}
