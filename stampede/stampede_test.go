package stampede_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/leasetest"
	"github.com/redislock-go/redislock/stampede"
)

// A cached value is returned without a fill; a cold one is filled and
// stored under the namespaced key with the lock's fence.
func TestCachedValue(t *testing.T) {
	t.Parallel()
	m := memory()
	g := newGroup(t, m, m)
	ctx := context.Background()
	fills := 0
	fill := func(context.Context) ([]byte, error) { fills++; return []byte(fmt.Sprint("v", fills)), nil }
	for range 3 {
		v, err := g.Do(ctx, "k", time.Minute, fill)
		require.NoError(t, err, "Do = %q; want v1", v)
		require.Equal(t, "v1", string(v), "Do = %q, %v; want v1", v, err)
	}
	assert.Equal(t, 1, fills, "%d fills, want 1", fills)
	rec, err := m.Get(ctx, lease.Key(stampede.DefaultPrefix, "k"))
	assert.False(t, err != nil || rec.Fence <= 0 || rec.TTL <= 0 || rec.TTL > time.Minute, "stored record %+v, %v; want a fenced record with the TTL", rec, err)
	if info, _ := m.Inspect(ctx, lease.Key(stampede.DefaultPrefix, "k")); info.Held {
		t.Error("the fill lock is still held after Do returned")
	}
}

// Callers of one Group share one flight: one read, one lock, one fill.
func TestOneFlightPerProcess(t *testing.T) {
	t.Parallel()
	ev := watch()
	m := memory()
	g := newGroup(t, m, m, ev.option())
	fill := newGate("v", nil)
	done := callers(context.Background(), g, 50, "k", time.Minute, fill.fill)
	ev.wait(t, stampede.EvJoin, 50)
	close(fill.open)
	for i, r := range collect(t, done) {
		require.False(t, r.err != nil, "caller %d: %q, %v", i, r.val, r.err)
		require.Equal(t, "v", string(r.val), "caller %d: %q, %v", i, r.val, r.err)
	}
	if n := fill.runs.Load(); n != 1 {
		t.Errorf("%d fills, want 1", n)
	}
	if n := ev.count(stampede.EvWait); n != 0 {
		t.Errorf("%d flights waited for the lock, want 0 (one flight)", n)
	}
}

// Groups on one backend (processes, in effect) fill once: the others wait
// for the lock and read the stored value.
func TestOneFillAcrossGroups(t *testing.T) {
	t.Parallel()
	ev := watch()
	m := memory()
	fill := newGate("v", nil)
	var dones []<-chan []result
	for range 3 {
		g := newGroup(t, m, m, ev.option())
		dones = append(dones, callers(context.Background(), g, 20, "k", time.Minute, fill.fill))
	}
	ev.wait(t, stampede.EvJoin, 60)
	ev.wait(t, stampede.EvWait, 2)
	close(fill.open)
	for _, d := range dones {
		for i, r := range collect(t, d) {
			require.False(t, r.err != nil, "caller %d: %q, %v", i, r.val, r.err)
			require.Equal(t, "v", string(r.val), "caller %d: %q, %v", i, r.val, r.err)
		}
	}
	if n := fill.runs.Load(); n != 1 {
		t.Errorf("%d fills, want 1", n)
	}
}

// A caller that gives up returns its ctx error at once; the fill goes on
// with its own ctx and stores the value.
func TestCallerCancelKeepsFill(t *testing.T) {
	t.Parallel()
	m := memory()
	g := newGroup(t, m, m)
	fill := newGate("v", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := callers(ctx, g, 1, "k", time.Minute, fill.fill)
	<-fill.started
	cancel()
	if r := collect(t, done)[0]; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled caller: %q, %v; want context.Canceled", r.val, r.err)
	}
	close(fill.open)
	v, err := g.Do(context.Background(), "k", time.Minute, func(context.Context) ([]byte, error) {
		return nil, errors.New("second fill")
	})
	require.NoError(t, err, "after the cancelled caller: %q; want the first fill's value", v)
	require.Equal(t, "v", string(v), "after the cancelled caller: %q, %v; want the first fill's value", v, err)
	if n := fill.runs.Load(); n != 1 {
		t.Errorf("%d fills, want 1", n)
	}
}

// A flight that waits for another holder ends when its last caller gave
// up; nothing is left running (goleak in TestMain), and the lock is not
// taken behind the callers' backs.
func TestAllCallersLeaveWhileWaiting(t *testing.T) {
	t.Parallel()
	ev := watch()
	m := memory()
	g := newGroup(t, m, m, ev.option())
	ctx := context.Background()
	held, err := m.Obtain(ctx, lease.Key(stampede.DefaultPrefix, "k"), time.Minute)
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	done := callers(cctx, g, 5, "k", time.Minute, newGate("v", nil).fill)
	ev.wait(t, stampede.EvWait, 1)
	cancel()
	for _, r := range collect(t, done) {
		require.ErrorIs(t, r.err, context.Canceled, "caller: %v, want context.Canceled", r.err)
	}
	if err := g.Close(); err != nil { // waits for the flight
		t.Fatal(err)
	}
	require.NoError(t, held.Release(ctx))
	if info, _ := m.Inspect(ctx, lease.Key(stampede.DefaultPrefix, "k")); info.Held {
		t.Error("the abandoned flight took the lock")
	}
}

// A fill whose lock is lost sees its ctx end with a cause matching
// ErrLockLost; its callers get the loss and nothing is stored.
func TestLockLostEndsFill(t *testing.T) {
	t.Parallel()
	clock := leasetest.NewFakeClock(time.Time{})
	m := memory(leasetest.WithClock(clock))
	g := newGroup(t, m, m, stampede.WithLease(300*time.Millisecond))
	cause := make(chan error, 1)
	fill := func(ctx context.Context) ([]byte, error) {
		clock.WaitTimers(2) // the renewal and its watchdog
		m.Break(lease.Key(stampede.DefaultPrefix, "k"))
		clock.Advance(100 * time.Millisecond) // the next renewal finds it gone
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return []byte("late"), nil
	}
	_, err := g.Do(context.Background(), "k", time.Minute, fill)
	require.ErrorIs(t, err, lease.ErrLockLost, "Do, want ErrLockLost")
	assert.ErrorIs(t, <-cause, lease.ErrLockLost, "fill's ctx cause, want ErrLockLost")
	_, err = m.Get(context.Background(), lease.Key(stampede.DefaultPrefix, "k"))
	assert.ErrorIs(t, err, lease.ErrNotFound, "record after a lost lock, want none")
}

// Close ends a waiting flight: its callers get ErrClosed, and Do after
// Close too.
func TestClose(t *testing.T) {
	t.Parallel()
	ev := watch()
	m := memory()
	g, err := stampede.New(m, m, ev.option())
	require.NoError(t, err)
	held, err := m.Obtain(context.Background(), lease.Key(stampede.DefaultPrefix, "k"), time.Minute)
	require.NoError(t, err)
	defer held.Release(context.Background())
	done := callers(context.Background(), g, 3, "k", time.Minute, newGate("v", nil).fill)
	ev.wait(t, stampede.EvWait, 1)
	require.NoError(t, g.Close())
	for _, r := range collect(t, done) {
		assert.ErrorIs(t, r.err, lease.ErrClosed, "caller of a closed Group: %v, want ErrClosed", r.err)
	}
	_, err = g.Do(context.Background(), "k", time.Minute, newGate("v", nil).fill)
	assert.ErrorIs(t, err, lease.ErrClosed, "Do after Close, want ErrClosed")
	assert.NoError(t, g.Close(), "second Close")
}

func TestInvalidInput(t *testing.T) {
	t.Parallel()
	m := memory()
	_, err := stampede.New(nil, m)
	assert.ErrorIs(t, err, lease.ErrInvalidArgument, "New(nil locker)")
	for name, opt := range map[string]stampede.Option{
		"lock TTL 0":      stampede.WithLease(0),
		"lock TTL 2ms":    stampede.WithLease(2 * time.Millisecond),
		"fill timeout 0":  stampede.WithFillTimeout(0),
		"nil wait":        stampede.WithRetry(nil),
		"negative TTL 0":  stampede.WithNegativeTTL(0),
		"early refresh 0": stampede.WithEarlyRefresh(0),
		"max refreshes 0": stampede.WithMaxRefreshes(0),
		"retries -1":      stampede.WithFillRetries(-1),
		"nil handler":     stampede.WithErrorHandler(nil),
		"long holder":     stampede.WithHolder(string(make([]byte, lease.MaxHolderLen+1))),
	} {
		_, err := stampede.New(m, m, opt)
		assert.ErrorIs(t, err, lease.ErrInvalidArgument, "%s: New, want ErrInvalidArgument", name)
	}
	g := newGroup(t, m, m, stampede.WithEarlyRefresh(time.Second))
	fill := newGate("v", nil).fill
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"empty key":       func() error { _, err := g.Do(ctx, "", time.Minute, fill); return err },
		"TTL 0":           func() error { _, err := g.Do(ctx, "k", 0, fill); return err },
		"TTL under early": func() error { _, err := g.Do(ctx, "k", time.Second, fill); return err },
		"nil fill":        func() error { _, err := g.Do(ctx, "k", time.Minute, nil); return err },
	} {
		assert.ErrorIs(t, call(), lease.ErrInvalidArgument, "%s: Do, want ErrInvalidArgument", name)
	}
}

// failingStore fails every Get.
type failingStore struct{ lease.Store }

var errBackend = errors.New("backend down")

func (failingStore) Get(context.Context, string) (lease.Record, error) {
	return lease.Record{}, errBackend
}

// A backend error is the callers' error, not a fill.
func TestBackendError(t *testing.T) {
	t.Parallel()
	m := memory()
	g := newGroup(t, m, failingStore{m})
	fill := newGate("v", nil)
	_, err := g.Do(context.Background(), "k", time.Minute, fill.fill)
	assert.ErrorIs(t, err, errBackend, "Do, want the store's error")
	if n := fill.runs.Load(); n != 0 {
		t.Errorf("%d fills on an unreadable cache, want 0", n)
	}
}
