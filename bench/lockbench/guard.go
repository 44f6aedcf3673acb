package lockbench

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
)

// failures records the first panic of a library inside a worker goroutine,
// so the cell is reported as FAILED instead of the whole run ending. Only the
// worker that panicked stops; recording costs nothing per operation.
type failures struct {
	first atomic.Pointer[string]
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
