package lockbench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// MStalled is how many of a repetition's workers returned only when their
// context was cancelled, Config.StopGrace after the window's end: a library
// call that waited for a wake-up that never came (a stalled peer).
const MStalled = "stalled_workers"

// errStalled marks a cell some of whose workers did not return at all, not
// even when their context was cancelled: the cell is reported as STALLED
// and skipped in later repetitions, its workers are left behind, and the
// run goes on.
var errStalled = errors.New("STALLED")

// crew runs a cell's workers and bounds how long they may take to stop,
// so that a library that stalls is reported as such and never hangs the
// tool.
type crew struct {
	wg   sync.WaitGroup
	live atomic.Int32
}

// Go runs f as one of the crew's workers.
func (c *crew) Go(f func()) {
	c.live.Add(1)
	c.wg.Go(func() {
		defer c.live.Add(-1)
		f()
	})
}

// stop waits for the workers once they have been told to stop: up to
// grace; then it cancels their context (cancel) and waits up to grace
// again. late is how many returned only after the cancel; an error
// matching errStalled reports those that had not returned even then (they
// keep running, left behind).
func (c *crew) stop(cancel context.CancelFunc, grace time.Duration) (late int, err error) {
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	tm := time.NewTimer(grace)
	defer tm.Stop()
	select {
	case <-done:
		return 0, nil
	case <-tm.C:
	}
	before := int(c.live.Load())
	cancel()
	tm.Reset(grace)
	select {
	case <-done:
		return before, nil
	case <-tm.C:
	}
	stuck := int(c.live.Load())
	return before - stuck, fmt.Errorf("%w: %d worker(s) did not return within %s of being told to stop, nor %s after their context was cancelled",
		errStalled, stuck, grace, grace)
}

// closeBounded closes lk, waiting at most grace for it: a Close that does
// not return is reported (errStalled) and left behind.
func closeBounded(lk Locker, grace time.Duration) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }() // a panicking Close must not end the run
		_ = lk.Close()
	}()
	tm := time.NewTimer(grace)
	defer tm.Stop()
	select {
	case <-done:
		return nil
	case <-tm.C:
		return fmt.Errorf("%w: Close did not return within %s", errStalled, grace)
	}
}
