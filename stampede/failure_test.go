package stampede_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/leasetest"
	"github.com/redislock-go/redislock/stampede"
)

// crowd is three Groups on one backend (three processes, in effect) with
// callers each, all in the flight before the fill may return: one Group
// fills, the two others wait for its lock.
func crowd(t *testing.T, m *leasetest.Memory, perGroup int, fill func(ctx context.Context) ([]byte, error), opts ...stampede.Option) (fills *atomic.Int32, results []result) {
	t.Helper()
	return crowdOn(t, func() (lease.Locker, lease.Store) { return m, m }, perGroup, fill, opts...)
}

// crowdOn is crowd on the backends that backend returns, one per Group.
func crowdOn(t *testing.T, backend func() (lease.Locker, lease.Store), perGroup int, fill func(ctx context.Context) ([]byte, error), opts ...stampede.Option) (fills *atomic.Int32, results []result) {
	t.Helper()
	ev := watch()
	opts = append(opts, ev.option())
	release := make(chan struct{})
	fills = new(atomic.Int32)
	gated := func(ctx context.Context) ([]byte, error) {
		fills.Add(1)
		<-release
		return fill(ctx)
	}
	var dones []<-chan []result
	for range 3 {
		locker, store := backend()
		g := newGroup(t, locker, store, opts...)
		dones = append(dones, callers(context.Background(), g, perGroup, "k", time.Minute, gated))
	}
	ev.wait(t, stampede.EvJoin, 3*perGroup)
	ev.wait(t, stampede.EvWait, 2)
	close(release)
	for _, d := range dones {
		results = append(results, collect(t, d)...)
	}
	return fills, results
}

var errFill = errors.New("database down")

// A failed fill is handed to every caller that waited for it, here and in
// the other processes, and is not cached: the next Do fills again.
func TestFailureReachesWaiters(t *testing.T) {
	t.Parallel()
	m := memory()
	fills, rs := crowd(t, m, 10, func(context.Context) ([]byte, error) { return nil, errFill })
	if n := fills.Load(); n != 1 {
		t.Errorf("%d fills, want 1 (the waiters must get the failure, not fill again)", n)
	}
	local, remote := 0, 0
	for i, r := range rs {
		var fe *stampede.FillError
		switch {
		case errors.Is(r.err, errFill) && errors.Is(r.err, stampede.ErrFillFailed):
			local++
		case errors.As(r.err, &fe) && errors.Is(r.err, stampede.ErrFillFailed) && fe.Message != "":
			remote++
		default:
			t.Fatalf("caller %d: %q, %v; want the fill's error", i, r.val, r.err)
		}
	}
	assert.False(t, local != 10 || remote != 20, "%d callers got the local error and %d the recorded one, want 10 and 20", local, remote)
	g := newGroup(t, m, m)
	v, err := g.Do(context.Background(), "k", time.Minute, func(context.Context) ([]byte, error) { return []byte("v"), nil })
	assert.False(t, err != nil || string(v) != "v", "Do after a failed fill: %q, %v; want a new fill", v, err)
}

// A panicking fill: every caller gets an error, the lock is released, and
// no goroutine is left.
func TestPanicReachesWaiters(t *testing.T) { // not parallel: it counts the goroutines left
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m := memory()
	fills, rs := crowd(t, m, 10, func(context.Context) ([]byte, error) { panic("boom") })
	if n := fills.Load(); n != 1 {
		t.Errorf("%d fills, want 1", n)
	}
	for i, r := range rs {
		var pe *stampede.PanicError
		var fe *stampede.FillError
		switch {
		case errors.As(r.err, &pe) && pe.Value == "boom" && len(pe.Stack) > 0:
		case errors.As(r.err, &fe) && fe.Panicked:
		default:
			t.Fatalf("caller %d: %q, %v; want the panic", i, r.val, r.err)
		}
		assert.False(t, !errors.Is(r.err, stampede.ErrPanicked) || !errors.Is(r.err, stampede.ErrFillFailed), "caller %d: %v does not match ErrPanicked and ErrFillFailed", i, r.err)
	}
	if info, _ := m.Inspect(context.Background(), lease.Key(stampede.DefaultPrefix, "k")); info.Held {
		t.Error("the lock is held after the panic")
	}
}

// A fill that calls runtime.Goexit (t.FailNow in a fill, say) ends its
// flight with an error instead of hanging its callers.
func TestGoexit(t *testing.T) {
	t.Parallel()
	m := memory()
	g := newGroup(t, m, m)
	rs := collect(t, callers(context.Background(), g, 5, "k", time.Minute, func(context.Context) ([]byte, error) {
		runtime.Goexit()
		return nil, nil
	}))
	for i, r := range rs {
		assert.ErrorIs(t, r.err, stampede.ErrFillFailed, "caller %d: %v, want ErrFillFailed", i, r.err)
	}
	rec, err := m.Get(context.Background(), lease.Key(stampede.DefaultPrefix, "k"))
	assert.False(t, err != nil || len(rec.Value) == 0 || rec.Value[0] != 'f', "record after Goexit: %q, %v; want a failure record", rec.Value, err)
}

// WithFillRetries: the waiters fill again instead of taking the failure.
func TestFillRetries(t *testing.T) {
	t.Parallel()
	m := memory()
	var n atomic.Int32
	fills, rs := crowd(t, m, 5, func(context.Context) ([]byte, error) {
		if n.Add(1) == 1 {
			return nil, errFill
		}
		return []byte("v"), nil
	}, stampede.WithFillRetries(1))
	for i, r := range rs {
		require.False(t, r.err != nil, "caller %d: %q, %v; want the retried fill's value", i, r.val, r.err)
		require.Equal(t, "v", string(r.val), "caller %d: %q, %v; want the retried fill's value", i, r.val, r.err)
	}
	if got := fills.Load(); got != 2 {
		t.Errorf("%d fills, want 2 (the failure and one retry)", got)
	}
}

// A miss is an error like any other by default; WithNegativeTTL caches it
// for its TTL.
func TestNegativeCaching(t *testing.T) {
	t.Parallel()
	clock := leasetest.NewFakeClock(time.Time{})
	m := memory(leasetest.WithClock(clock))
	ctx := context.Background()
	fills := 0
	miss := func(context.Context) ([]byte, error) {
		fills++
		return nil, fmt.Errorf("user 42: %w", stampede.ErrMissing)
	}
	plain := newGroup(t, m, m)
	for range 2 {
		_, err := plain.Do(ctx, "plain", time.Minute, miss)
		require.ErrorIs(t, err, stampede.ErrMissing, "Do, want ErrMissing")
	}
	assert.Equal(t, 2, fills, "%d fills without negative caching, want 2", fills)
	fills = 0
	neg := newGroup(t, m, m, stampede.WithNegativeTTL(time.Second))
	for range 3 {
		_, err := neg.Do(ctx, "neg", time.Minute, miss)
		require.ErrorIs(t, err, stampede.ErrMissing, "Do, want ErrMissing")
	}
	assert.Equal(t, 1, fills, "%d fills with a cached miss, want 1", fills)
	clock.Advance(time.Second)
	if _, err := neg.Do(ctx, "neg", time.Minute, miss); !errors.Is(err, stampede.ErrMissing) || fills != 2 {
		t.Errorf("after the negative TTL: %v and %d fills, want a new fill", err, fills)
	}
}

// A fill that outlives the fill timeout sees its ctx end; its callers get
// the deadline error, and it is recorded as a failure for the waiters of
// other processes (not cached: the next Do fills again).
func TestFillTimeout(t *testing.T) {
	t.Parallel()
	m := memory()
	g := newGroup(t, m, m, stampede.WithFillTimeout(time.Millisecond))
	_, err := g.Do(context.Background(), "k", time.Minute, func(ctx context.Context) ([]byte, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	assert.False(t, !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, stampede.ErrFillFailed), "Do = %v, want a failed fill matching DeadlineExceeded", err)
	rec, err := m.Get(context.Background(), lease.Key(stampede.DefaultPrefix, "k"))
	assert.False(t, err != nil || len(rec.Value) == 0 || rec.Value[0] != 'f', "record after a timed-out fill: %q, %v; want a failure record", rec.Value, err)
	v, err := g.Do(context.Background(), "k", time.Minute, func(context.Context) ([]byte, error) { return []byte("v"), nil })
	assert.False(t, err != nil || string(v) != "v", "Do after a timed-out fill: %q, %v; want a new fill", v, err)
}

// A fill that times out is answered to every caller that waited for it, in
// every process, with its timeout: it runs once, not once per process in
// turn (each another fill timeout).
func TestFillTimeoutReachesWaiters(t *testing.T) {
	t.Parallel()
	m := memory()
	fills, rs := crowd(t, m, 5, hang, stampede.WithFillTimeout(50*time.Millisecond))
	checkTimedOut(t, fills.Load(), rs, 5)
}

// hang is a fill that returns only when its ctx ends.
func hang(ctx context.Context) ([]byte, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// checkTimedOut checks a crowd whose one fill timed out: local callers
// got the deadline, the others the recorded failure.
func checkTimedOut(t *testing.T, fills int32, rs []result, local int) {
	t.Helper()
	assert.Equal(t, int32(1), fills, "%d fills, want 1: the waiters of other processes must get the timeout, not fill in turn", fills)
	mine, recorded := 0, 0
	for i, r := range rs {
		var fe *stampede.FillError
		switch {
		case errors.Is(r.err, context.DeadlineExceeded) && errors.Is(r.err, stampede.ErrFillFailed):
			mine++
		case errors.As(r.err, &fe) && strings.Contains(fe.Message, context.DeadlineExceeded.Error()):
			recorded++
		default:
			t.Fatalf("caller %d: %q, %v; want the fill's timeout", i, r.val, r.err)
		}
	}
	assert.False(t, mine != local || recorded != len(rs)-local, "%d callers got the timeout and %d the recorded one, want %d and %d", mine, recorded, local, len(rs)-local)
}
