package lockbench

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"
)

// failures records the first panic of a library inside a worker goroutine,
// so the cell is reported as FAILED instead of the whole run ending. Only the
// worker that panicked stops; recording costs nothing per operation. It
// also holds what bounds the stop of the cell's workers (crew.stop): the
// cancel of their context and the grace they get.
type failures struct {
	first  atomic.Pointer[string]
	cancel context.CancelFunc // cancels the workers' context; nil: nothing to cancel
	grace  time.Duration      // Config.StopGrace
}

// stop waits for c's workers to return (crew.stop), with f's cancel and
// grace.
func (f *failures) stop(c *crew) (late int, err error) {
	cancel := f.cancel
	if cancel == nil {
		cancel = func() {}
	}
	return c.stop(cancel, f.grace)
}

// catch is deferred at the top of every worker goroutine.
func (f *failures) catch() {
	r := recover()
	if r == nil {
		return
	}
	msg := fmt.Sprintf("panic: %v", r)
	// Name the first frame outside the runtime and this package.
	for _, line := range strings.Split(string(debug.Stack()), "\n") {
		if strings.HasPrefix(line, "\t") && !strings.Contains(line, "/runtime/") && !strings.Contains(line, "/bench/lockbench/") {
			msg += " at " + strings.TrimSpace(line)
			break
		}
	}
	f.first.CompareAndSwap(nil, &msg)
}

func (f *failures) err() error {
	if p := f.first.Load(); p != nil {
		return fmt.Errorf("%w: %s", errFailed, *p)
	}
	return nil
}
