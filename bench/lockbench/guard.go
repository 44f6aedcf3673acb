package lockbench

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"
)

// guarded wraps a Locker so that a panic inside the library (on the calling
// goroutine) becomes an error and a failed cell in the report instead of the
// end of the whole run.
type guarded struct {
	Locker
	panicked atomic.Pointer[string]
}

type guardedHeld struct {
	Held
	g *guarded
}

func (g *guarded) catch(err *error) {
	if r := recover(); r != nil {
		msg := fmt.Sprintf("panic: %v", r)
		if st := string(debug.Stack()); st != "" {
			// Keep the library frame that panicked, not the whole stack.
			for _, line := range strings.Split(st, "\n") {
				if strings.HasPrefix(line, "\t") && !strings.Contains(line, "/runtime/") && !strings.Contains(line, "lockbench/guard.go") {
					msg += " at " + strings.TrimSpace(line)
					break
				}
			}
		}
		g.panicked.CompareAndSwap(nil, &msg)
		*err = fmt.Errorf("lockbench: library %s", msg)
	}
}

func (g *guarded) Obtain(ctx context.Context, key string, ttl time.Duration) (h Held, err error) {
	defer g.catch(&err)
	h, err = g.Locker.Obtain(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return guardedHeld{h, g}, nil
}

func (h guardedHeld) Release(ctx context.Context) (err error) {
	defer h.g.catch(&err)
	return h.Held.Release(ctx)
}

// guardedRenewer adds Hold when the wrapped Locker is a Renewer.
type guardedRenewer struct{ *guarded }

func (g guardedRenewer) Hold(ctx context.Context, key string, ttl time.Duration, fn func(context.Context) error) (err error) {
	defer g.catch(&err)
	return g.Locker.(Renewer).Hold(ctx, key, ttl, fn)
}

func guard(l Locker) (Locker, *guarded) {
	g := &guarded{Locker: l}
	if _, ok := l.(Renewer); ok {
		return guardedRenewer{g}, g
	}
	return g, g
}

func (g *guarded) failure() error {
	if p := g.panicked.Load(); p != nil {
		return fmt.Errorf("%w: %s", errFailed, *p)
	}
	return nil
}
