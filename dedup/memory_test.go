package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/dedup"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/leasetest"
)

// Deduplication on leasetest.Memory with a fake clock: fast and
// deterministic, no sleeps.

const (
	memLease = time.Second
	memRenew = 300 * time.Millisecond
)

type memEnv struct {
	t     *testing.T
	clock *leasetest.FakeClock
	m     *leasetest.Memory
}

// waitTimers waits until n timers are pending on the fake clock: every
// goroutine under test waits on it. Ten seconds without is a failure.
func (env memEnv) waitTimers(n int) {
	env.t.Helper()
	env.clock.AwaitTimers(env.t, n, 10*time.Second)
}

func newMemEnv(t *testing.T) memEnv {
	c := leasetest.NewFakeClock(time.Time{})
	return memEnv{t: t, clock: c, m: leasetest.NewMemory(leasetest.WithClock(c))}
}

func (env memEnv) group(opts ...dedup.Option) *dedup.Group {
	env.t.Helper()
	opts = append([]dedup.Option{dedup.WithLease(memLease), dedup.WithRefreshInterval(memRenew), dedup.WithClock(env.clock)}, opts...)
	g, err := dedup.New(env.m, env.m, opts...)
	if err != nil {
		env.t.Fatalf("New: %v", err)
	}
	return g
}

// counted is a job that counts its runs and returns "v:<id>".
type counted struct {
	mu   sync.Mutex
	runs map[string]int
}

func newCounted() *counted { return &counted{runs: make(map[string]int)} }

func (c *counted) job(id string) dedup.Job {
	return func(context.Context, int64) ([]byte, error) {
		c.mu.Lock()
		c.runs[id]++
		c.mu.Unlock()
		return []byte("v:" + id), nil
	}
}

func (c *counted) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantIs(t *testing.T, what string, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		require.ErrorIs(t, err, target, "%s: got, want an error matching %v", what, target)
	}
}

func recv[T any](t *testing.T, ctx context.Context, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

func TestNewRejectsBadInput(t *testing.T) {
	t.Parallel()
	m := leasetest.NewMemory()
	for _, c := range []struct {
		name   string
		locker lease.Locker
		store  lease.Store
		opts   []dedup.Option
	}{
		{"nil locker", nil, m, nil},
		{"nil store", m, nil, nil},
		{"zero lease", m, m, []dedup.Option{dedup.WithLease(0)}},
		{"lease within drift", m, m, []dedup.Option{dedup.WithLease(2 * time.Millisecond)}},
		{"zero refresh", m, m, []dedup.Option{dedup.WithRefreshInterval(0)}},
		{"refresh above lease", m, m, []dedup.Option{dedup.WithLease(time.Second), dedup.WithRefreshInterval(time.Second)}},
		{"short period", m, m, []dedup.Option{dedup.WithScope(dedup.ForPeriod(time.Microsecond))}},
		{"negative retention", m, m, []dedup.Option{dedup.WithRetention(-time.Second)}},
		{"retention with a period", m, m, []dedup.Option{dedup.WithScope(dedup.ForPeriod(time.Hour)), dedup.WithRetention(time.Hour)}},
		{"nil retry", m, m, []dedup.Option{dedup.WithRetry(nil)}},
		{"long holder", m, m, []dedup.Option{dedup.WithHolder(strings.Repeat("h", lease.MaxHolderLen+1))}},
		{"nil clock", m, m, []dedup.Option{dedup.WithClock(nil)}},
	} {
		g, err := dedup.New(c.locker, c.store, c.opts...)
		assert.False(t, g != nil || !errors.Is(err, lease.ErrInvalidArgument), "New with %s: %v, %v; want an error matching ErrInvalidArgument", c.name, g, err)
	}
	g, err := dedup.New(m, m)
	require.NoError(t, err)
	ctx := ctxFor(t)
	job := newCounted().job("x")
	for name, err := range map[string]error{
		"empty id": func() error { _, err := g.Do(ctx, "", job); return err }(),
		"nil job":  func() error { _, err := g.Do(ctx, "x", nil); return err }(),
	} {
		wantIs(t, "Do with "+name, err, lease.ErrInvalidArgument)
	}
}

// A job runs once; its repeats get its recorded value and fence.
func TestDoRunsOnce(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	g := env.group()
	c := newCounted()
	first, err := g.Do(ctx, "job-1", c.job("job-1"))
	require.NoError(t, err, "first Do: %+v", first)
	require.True(t, first.Ran, "first Do: %+v, %v", first, err)
	require.Equal(t, "v:job-1", string(first.Value), "first Do: %+v, %v", first, err)
	require.Greater(t, first.Fence, int64(0), "first Do: %+v, %v", first, err)
	for i := range 3 {
		r, err := g.Do(ctx, "job-1", c.job("job-1"))
		require.NoError(t, err, "repeat %d: %+v; want the recorded outcome of fence %d", i, r, first.Fence)
		require.False(t, r.Ran, "repeat %d: %+v, %v; want the recorded outcome of fence %d", i, r, err, first.Fence)
		require.Equal(t, "v:job-1", string(r.Value), "repeat %d: %+v, %v; want the recorded outcome of fence %d", i, r, err, first.Fence)
		require.Equal(t, first.Fence, r.Fence, "repeat %d: %+v, %v; want the recorded outcome of fence %d", i, r, err, first.Fence)
	}
	if n := c.count("job-1"); n != 1 {
		t.Fatalf("job ran %d times", n)
	}
	// Another group with another prefix is another namespace.
	other := env.group(dedup.WithPrefix("other:"))
	if r, err := other.Do(ctx, "job-1", c.job("job-1")); err != nil || !r.Ran {
		t.Fatalf("Do under another prefix: %+v, %v", r, err)
	}
	// Retention: after it, the id runs again.
	env.clock.Advance(dedup.DefaultRetention)
	if r, err := g.Do(ctx, "job-1", c.job("job-1")); err != nil || !r.Ran || r.Fence <= first.Fence {
		t.Fatalf("Do after the retention: %+v, %v; want a new run", r, err)
	}
}

func TestScopes(t *testing.T) {
	t.Parallel()
	errJob := errors.New("card declined")
	failing := func(runs *int) dedup.Job {
		return func(context.Context, int64) ([]byte, error) { *runs++; return nil, errJob }
	}
	t.Run("UntilDone", func(t *testing.T) {
		env := newMemEnv(t)
		ctx := ctxFor(t)
		g := env.group()
		runs := 0
		for i := range 2 {
			_, err := g.Do(ctx, "j", failing(&runs))
			require.ErrorIs(t, err, errJob, "run %d, want the job's error", i)
		}
		require.Equal(t, 2, runs, "a failed job ran %d times in 2 calls, want it retried", runs)
		c := newCounted()
		_, err := g.Do(ctx, "j", c.job("j"))
		require.NoError(t, err)
		if r, err := g.Do(ctx, "j", failing(&runs)); err != nil || r.Ran || string(r.Value) != "v:j" {
			t.Fatalf("after a success: %+v, %v", r, err)
		}
	})
	t.Run("UntilDoneOrFailed", func(t *testing.T) {
		env := newMemEnv(t)
		ctx := ctxFor(t)
		g := env.group(dedup.WithScope(dedup.UntilDoneOrFailed), dedup.WithRetention(0))
		runs := 0
		first, err := g.Do(ctx, "j", failing(&runs))
		require.ErrorIs(t, err, errJob, "first run: %+v", first)
		require.True(t, first.Ran, "first run: %+v, %v", first, err)
		env.clock.Advance(1000 * time.Hour) // retention 0: kept
		r, err := g.Do(ctx, "j", failing(&runs))
		var fe *dedup.FailedError
		require.True(t, errors.As(err, &fe), "repeat of a failed job: %+v, %v; want its FailedError", r, err)
		require.ErrorIs(t, err, dedup.ErrFailed, "repeat of a failed job: %+v; want its FailedError", r)
		require.Equal(t, errJob.Error(), fe.Msg, "repeat of a failed job: %+v, %v; want its FailedError", r, err)
		require.Equal(t, first.Fence, fe.Fence, "repeat of a failed job: %+v, %v; want its FailedError", r, err)
		require.False(t, r.Ran, "repeat of a failed job: %+v, %v; want its FailedError", r, err)
		require.Equal(t, 1, runs, "a failed job ran %d times", runs)
	})
	t.Run("ForPeriod", func(t *testing.T) {
		env := newMemEnv(t)
		ctx := ctxFor(t)
		g := env.group(dedup.WithScope(dedup.ForPeriod(time.Minute)))
		c := newCounted()
		slow := func(ctx context.Context, fence int64) ([]byte, error) {
			env.clock.Advance(10 * time.Second) // the period counts from the start
			return c.job("j")(ctx, fence)
		}
		_, err := g.Do(ctx, "j", slow)
		require.NoError(t, err)
		env.clock.Advance(50*time.Second - time.Millisecond)
		if r, err := g.Do(ctx, "j", slow); err != nil || r.Ran {
			t.Fatalf("within the period: %+v, %v", r, err)
		}
		env.clock.Advance(time.Millisecond)
		if r, err := g.Do(ctx, "j", c.job("j")); err != nil || !r.Ran {
			t.Fatalf("after the period: %+v, %v; want a new run", r, err)
		}
		runs := 0
		_, err = g.Do(ctx, "f", failing(&runs))
		require.ErrorIs(t, err, errJob)
		if _, err := g.Do(ctx, "f", failing(&runs)); !errors.Is(err, dedup.ErrFailed) || runs != 1 {
			t.Fatalf("a failure within the period: %v after %d runs; want ErrFailed", err, runs)
		}
		if s := dedup.ForPeriod(time.Minute).String(); s != "ForPeriod(1m0s)" {
			t.Errorf("String: %s", s)
		}
	})
}

// A duplicate that arrives while the job runs gets an InProgressError
// naming the holder; with WithRetry it waits and gets the run's outcome.
func TestInProgress(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	g := env.group(dedup.WithHolder("worker-1"))
	waiter := env.group(dedup.WithRetry(lease.LinearBackoff(100 * time.Millisecond)))
	c := newCounted()
	running := make(chan struct{})
	finish := make(chan struct{})
	done := make(chan dedup.Result, 1)
	go func() {
		r, err := g.Do(ctx, "j", func(ctx context.Context, fence int64) ([]byte, error) {
			close(running)
			<-finish
			return c.job("j")(ctx, fence)
		})
		assert.NoError(t, err)
		done <- r
	}()
	<-running
	_, err := g.Do(ctx, "j", c.job("j"))
	var busy *dedup.InProgressError
	require.True(t, errors.As(err, &busy), "duplicate while running: %v; want an InProgressError naming worker-1 with its TTL", err)
	require.ErrorIs(t, err, dedup.ErrInProgress, "duplicate while running; want an InProgressError naming worker-1 with its TTL")
	require.Equal(t, "worker-1", busy.Holder, "duplicate while running: %v; want an InProgressError naming worker-1 with its TTL", err)
	require.Greater(t, busy.TTL, time.Duration(0), "duplicate while running: %v; want an InProgressError naming worker-1 with its TTL", err)
	require.LessOrEqual(t, busy.TTL, time.Duration(memLease), "duplicate while running: %v; want an InProgressError naming worker-1 with its TTL", err)
	waited := make(chan dedup.Result, 1)
	go func() {
		r, err := waiter.Do(ctx, "j", c.job("j"))
		assert.NoError(t, err)
		waited <- r
	}()
	env.waitTimers(3) // the run's renewal and lease watchdog; the waiter's wait
	close(finish)
	r := recv(t, ctx, done, "the run")
	w := recv(t, ctx, waited, "the waiting duplicate")
	require.False(t, w.Ran, "waiting duplicate: %+v; want the run's outcome %+v", w, r)
	require.Equal(t, "v:j", string(w.Value), "waiting duplicate: %+v; want the run's outcome %+v", w, r)
	require.Equal(t, r.Fence, w.Fence, "waiting duplicate: %+v; want the run's outcome %+v", w, r)
	if n := c.count("j"); n != 1 {
		t.Fatalf("job ran %d times", n)
	}
	// A waiter whose ctx ends while the job runs says so.
	running2 := make(chan struct{})
	finish2 := make(chan struct{})
	done2 := make(chan struct{})
	go func() {
		_, _ = g.Do(ctx, "k", func(context.Context, int64) ([]byte, error) { close(running2); <-finish2; return nil, nil })
		close(done2)
	}()
	<-running2
	wctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := waiter.Do(wctx, "k", c.job("k")); errc <- err }()
	env.waitTimers(3)
	cancel()
	wantIs(t, "waiter after cancel", <-errc, dedup.ErrInProgress, context.Canceled)
	close(finish2)
	<-done2
}

// The lease is renewed while the job runs, for many leases.
func TestLeaseRenewedWhileRunning(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	g := env.group()
	running := make(chan struct{})
	finish := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, "long", func(ctx context.Context, _ int64) ([]byte, error) {
			close(running)
			select {
			case <-finish:
				return nil, nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		})
		done <- err
	}()
	<-running
	for range 10 {
		env.clock.Advance(memRenew)
	}
	_, err := g.Do(ctx, "long", newCounted().job("long"))
	require.ErrorIs(t, err, dedup.ErrInProgress, "duplicate after %v of running, want ErrInProgress", 10*memRenew)
	close(finish)
	require.NoError(t, <-done, "long job")
}

// A worker that crashed mid-job (its lock is never renewed nor released)
// leaves the job retryable once its lease ends, not before.
func TestCrashedWorkerRetryableAfterLease(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	g := env.group()
	if _, err := env.m.Obtain(ctx, lease.Key(dedup.DefaultPrefix, "j"), memLease); err != nil { // the crashed worker's lock
		t.Fatal(err)
	}
	c := newCounted()
	var busy *dedup.InProgressError
	if _, err := g.Do(ctx, "j", c.job("j")); !errors.As(err, &busy) || busy.TTL != memLease {
		t.Fatalf("while the crashed worker's lease lasts: %v, want ErrInProgress with TTL %v", err, memLease)
	}
	env.clock.Advance(memLease - time.Millisecond)
	_, err := g.Do(ctx, "j", c.job("j"))
	require.ErrorIs(t, err, dedup.ErrInProgress, "1ms before the lease ends, want ErrInProgress")
	env.clock.Advance(time.Millisecond)
	if r, err := g.Do(ctx, "j", c.job("j")); err != nil || !r.Ran {
		t.Fatalf("after the lease: %+v, %v; want a run", r, err)
	}
}

// A run whose lock is lost gets its ctx cancelled; a successor runs the
// job with a higher fence; the stale run's late fenced write is refused,
// and so is its record.
func TestLostRunIsFencedOut(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	a := env.group()
	b := env.group()
	const sinkKey = "sink:j"
	lost := make(chan struct{})
	resume := make(chan struct{})
	wrote := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		_, err := a.Do(ctx, "j", func(ctx context.Context, fence int64) ([]byte, error) {
			env.m.Break(lease.Key(dedup.DefaultPrefix, "j")) // the lease is gone, as after a long pause
			env.clock.Advance(memRenew)
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second): // a failure bound
				t.Error("the job's ctx was not cancelled when its lock was lost")
			}
			close(lost)
			<-resume // a stale run that does not stop at once
			wrote <- env.m.Put(context.Background(), sinkKey, []byte("a"), fence, 0)
			return []byte("a"), nil
		})
		done <- err
	}()
	<-lost
	r, err := b.Do(ctx, "j", func(ctx context.Context, fence int64) ([]byte, error) {
		return []byte("b"), env.m.Put(ctx, sinkKey, []byte("b"), fence, 0)
	})
	require.NoError(t, err, "successor: %+v; want a run", r)
	require.True(t, r.Ran, "successor: %+v, %v; want a run", r, err)
	close(resume)
	wantIs(t, "the stale run's write", <-wrote, lease.ErrStaleFence)
	wantIs(t, "the stale run", <-done, lease.ErrLockLost, lease.ErrStaleFence)
	if rec, err := env.m.Get(ctx, sinkKey); err != nil || string(rec.Value) != "b" || rec.Fence != r.Fence {
		t.Fatalf("sink: %+v, %v; want b's write", rec, err)
	}
	if again, err := a.Do(ctx, "j", newCounted().job("j")); err != nil || again.Ran || string(again.Value) != "b" {
		t.Fatalf("repeat: %+v, %v; want b's outcome", again, err)
	}
}

// A panicking job leaves nothing locked and nothing recorded.
func TestPanicLeavesJobRetryable(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	g := env.group()
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the job's panic", r)
			}
		}()
		_, _ = g.Do(ctx, "j", func(context.Context, int64) ([]byte, error) { panic("boom") })
	}()
	if r, err := g.Do(ctx, "j", newCounted().job("j")); err != nil || !r.Ran {
		t.Fatalf("after a panic: %+v, %v; want a run", r, err)
	}
}

func TestBadRecord(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := ctxFor(t)
	g := env.group()
	for i, v := range [][]byte{nil, []byte("?x")} {
		id := fmt.Sprintf("j%d", i)
		require.NoError(t, env.m.Put(ctx, lease.Key(dedup.DefaultPrefix, id), v, 1, 0))
		_, err := g.Do(ctx, id, newCounted().job(id))
		assert.ErrorIs(t, err, dedup.ErrBadRecord, "Do over %q, want ErrBadRecord", v)
	}
}
