package stampede_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/leasetest"
	"github.com/redislock-go/redislock/stampede"
)

// waitBound bounds every wait for an event: a failure bound, never a
// pause.
const waitBound = 20 * time.Second

// events counts the package's test hook events and lets a test wait for
// them.
type events struct {
	mu      sync.Mutex
	n       map[string]int
	changed chan struct{}
}

func watch() *events { return &events{n: map[string]int{}, changed: make(chan struct{})} }

// option is the Group option that reports the Group's events to e.
func (e *events) option() stampede.Option {
	return stampede.WithTestHook(func(ev, _ string) {
		e.mu.Lock()
		e.n[ev]++
		close(e.changed)
		e.changed = make(chan struct{})
		e.mu.Unlock()
	})
}

// wait blocks until ev happened at least n times.
func (e *events) wait(t testing.TB, ev string, n int) {
	t.Helper()
	timeout := time.After(waitBound)
	for {
		e.mu.Lock()
		got, ch := e.n[ev], e.changed
		e.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("%d %q events, want %d", got, ev, n)
		}
	}
}

func (e *events) count(ev string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[ev]
}

// newGroup returns a Group on m, closed when t ends.
func newGroup(t testing.TB, locker lease.Locker, store lease.Store, opts ...stampede.Option) *stampede.Group {
	t.Helper()
	g, err := stampede.New(locker, store, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// gate is a fill that counts its runs and blocks until opened.
type gate struct {
	runs    atomic.Int32
	open    chan struct{}
	started chan struct{} // receives once per run
	val     []byte
	err     error
}

func newGate(val string, err error) *gate {
	return &gate{open: make(chan struct{}), started: make(chan struct{}, 100), val: []byte(val), err: err}
}

func (g *gate) fill(ctx context.Context) ([]byte, error) {
	g.runs.Add(1)
	g.started <- struct{}{}
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	return g.val, g.err
}

// result is one Do's outcome.
type result struct {
	val []byte
	err error
}

// callers runs n concurrent Do calls on g and returns their results once
// all have returned.
func callers(ctx context.Context, g *stampede.Group, n int, key string, ttl time.Duration, fill stampede.Fill) <-chan []result {
	out := make(chan []result, 1)
	go func() {
		rs := make([]result, n)
		var wg sync.WaitGroup
		for i := range rs {
			wg.Go(func() {
				v, err := g.Do(ctx, key, ttl, fill)
				rs[i] = result{v, err}
			})
		}
		wg.Wait()
		out <- rs
	}()
	return out
}

func collect(t testing.TB, ch <-chan []result) []result {
	t.Helper()
	select {
	case rs := <-ch:
		return rs
	case <-time.After(waitBound):
		t.Fatal("callers did not return")
	}
	return nil
}

func memory(opts ...leasetest.MemoryOption) *leasetest.Memory { return leasetest.NewMemory(opts...) }
