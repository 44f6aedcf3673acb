package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/semaphore"
)

const waitBound = 20 * time.Second

func newSem(t testing.TB, rdb redis.UniversalClient, name string, limit int, opts ...semaphore.Option) *semaphore.Semaphore {
	t.Helper()
	s, err := semaphore.New(rdb, name, limit, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func try(t testing.TB, s *semaphore.Semaphore, ttl time.Duration) *semaphore.Permit {
	t.Helper()
	p, err := s.TryAcquire(context.Background(), ttl)
	require.NoError(t, err, "TryAcquire")
	return p
}

// N permits, each with its own slot, token and increasing fence; the
// N+1st is refused until one is released, and then gets that slot.
func TestLimit(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newSem(t, srv.Client(nil), "limit", 4)
	ctx := context.Background()
	var ps []*semaphore.Permit
	for i := range 4 {
		p := try(t, s, time.Minute)
		assert.False(t, p.Slot() != i || p.Key() != "limit" || len(p.Token()) < 26, "permit %d: slot %d, key %q, token %q", i, p.Slot(), p.Key(), p.Token())
		if i > 0 && p.Fence() <= ps[i-1].Fence() {
			t.Errorf("fence %d after %d", p.Fence(), ps[i-1].Fence())
		}
		ps = append(ps, p)
	}
	_, err := s.TryAcquire(ctx, time.Minute)
	require.ErrorIs(t, err, lease.ErrNotObtained, "fifth TryAcquire, want ErrNotObtained")
	require.NoError(t, ps[2].Release(ctx))
	assert.ErrorIs(t, ps[2].Release(ctx), lease.ErrNotHeld, "second Release, want ErrNotHeld")
	p := try(t, s, time.Minute)
	assert.False(t, p.Slot() != 2 || p.Fence() <= ps[3].Fence(), "after a release: slot %d fence %d, want slot 2 and a new fence", p.Slot(), p.Fence())
}

// queued counts the Acquire attempts that queued.
type queued struct {
	mu      sync.Mutex
	n       int
	changed chan struct{}
}

func watchQueued() *queued { return &queued{changed: make(chan struct{})} }

// option is the Semaphore option that counts its queued attempts in q.
func (q *queued) option() semaphore.Option {
	return semaphore.WithTestHook(func(ev, _ string) {
		if ev != semaphore.EvQueued {
			return
		}
		q.mu.Lock()
		q.n++
		close(q.changed)
		q.changed = make(chan struct{})
		q.mu.Unlock()
	})
}

func (q *queued) count() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

func (q *queued) wait(t testing.TB, n int) {
	t.Helper()
	timeout := time.After(waitBound)
	for {
		q.mu.Lock()
		got, ch := q.n, q.changed
		q.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("%d queued attempts, want %d", got, n)
		}
	}
}

// Waiters, in any number of processes, get the slot in arrival order, each
// woken by the release before it.
func TestFIFO(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	q := watchQueued()
	holder := try(t, newSem(t, srv.Client(nil), "fifo", 1), time.Minute)
	ctx := context.Background()
	got := make(chan int, 5)
	var wg sync.WaitGroup
	for i := range 5 {
		// A process each; with a queue TTL so long that the waiters'
		// timers never fire, each is woken by the release before it.
		s := newSem(t, srv.Client(nil), "fifo", 1, semaphore.WithQueueTTL(6*waitBound), q.option())
		wg.Go(func() {
			p, err := s.Acquire(ctx, time.Minute)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				got <- -1
				return
			}
			got <- i
			_ = p.Release(ctx)
		})
		q.wait(t, 2*(i+1)) // queued (the attempt and the one after subscribing)
	}
	require.NoError(t, holder.Release(ctx))
	var order []int
	for range 5 {
		select {
		case i := <-got:
			order = append(order, i)
		case <-time.After(waitBound): // before any waiter's timer
			t.Fatalf("grants %v, then none: the releases did not wake the waiters", order)
		}
	}
	wg.Wait()
	assert.True(t, slices.Equal(order, []int{0, 1, 2, 3, 4}), "grant order %v, want arrival order", order)
	if n := q.count(); n != 10 {
		t.Errorf("%d queued attempts, want 10: each waiter's first and the one after subscribing, then woken once", n)
	}
}

// A holder that dies (stops renewing) frees its slot when its lease ends
// on the server; its permit can then be neither renewed nor released.
func TestDeadHolderFreesSlot(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	// The dead holder's lease is long, then set to end 200 ms from now on
	// the server's clock (its end in the holders set): a 200 ms TTL would
	// race the grant's own confirmation on a loaded machine.
	deadSem := newSem(t, srv.Client(nil), "dead", 1)
	dead := try(t, deadSem, time.Minute)
	setLeaseEnd(t, srv, deadSem, dead, serverMillis(t, srv)+200)
	s := newSem(t, srv.Client(nil), "dead", 1)
	actx, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	p, err := s.Acquire(actx, time.Minute)
	require.NoError(t, err, "Acquire behind a dead holder")
	assert.Greater(t, p.Fence(), dead.Fence(), "successor fence %d <= dead holder's %d", p.Fence(), dead.Fence())
	assert.ErrorIs(t, dead.Refresh(ctx, time.Minute), lease.ErrNotHeld, "dead holder's Refresh, want ErrNotHeld")
	assert.True(t, dead.ValidUntil().IsZero(), "dead holder's ValidUntil is not zero after ErrNotHeld")
	assert.ErrorIs(t, dead.Release(ctx), lease.ErrNotHeld, "dead holder's Release, want ErrNotHeld")
	if ttl, err := p.TTL(ctx); err != nil || ttl <= 0 {
		t.Errorf("successor's TTL = %v, %v", ttl, err)
	}
}

// countingLock reports each renewal lease.Hold makes, with the validity
// it confirmed (read before Hold can start the next one). A renewal the
// test no longer reads is dropped, never blocks Hold.
type countingLock struct {
	lease.Lock
	refreshes chan time.Time
}

func (c *countingLock) Refresh(ctx context.Context, ttl time.Duration) error {
	err := c.Lock.Refresh(ctx, ttl)
	if err == nil {
		select {
		case c.refreshes <- c.Lock.ValidUntil():
		default:
		}
	}
	return err
}

// lease.Hold keeps a permit renewed: each renewal is a Refresh the server
// confirms, moving the permit's validity on. The TTL is long and the
// interval short, so a stall of the loaded machine cannot end the lease
// between renewals (Hold's timing against the TTL is tested on a fake
// clock in lease); waitBound only bounds a hang.
func TestHoldRenews(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newSem(t, srv.Client(nil), "hold", 1)
	ctx := context.Background()
	const ttl = time.Minute
	p := try(t, s, ttl)
	c := &countingLock{Lock: p, refreshes: make(chan time.Time, 6)}
	h, err := lease.Hold(ctx, c, ttl, lease.WithRefreshInterval(10*time.Millisecond))
	require.NoError(t, err)
	until := p.ValidUntil()
	for i := range 6 {
		var next time.Time
		select {
		case next = <-c.refreshes:
		case <-h.Done():
			t.Fatalf("lost: %v", h.Err())
		case <-time.After(waitBound):
			t.Fatal("no renewal")
		}
		require.True(t, next.After(until), "renewal %d: valid until %v, not after %v", i, next, until)
		until = next
	}
	if d, err := p.TTL(ctx); err != nil || d <= 0 || d > ttl {
		t.Fatalf("TTL on the server after the renewals: %v, %v", d, err)
	}
	_, err = s.TryAcquire(ctx, time.Second)
	assert.ErrorIs(t, err, lease.ErrNotObtained, "TryAcquire while held")
	require.NoError(t, h.Release(ctx))
	assert.False(t, p.ValidUntil().IsZero() == false, "ValidUntil after Release is not zero")
}

// Inspect lists the holders by slot with their identities and leases, and
// the waiters.
func TestInspect(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	q := watchQueued()
	ctx := context.Background()
	a := newSem(t, srv.Client(nil), "inspect", 2, semaphore.WithHolder("host-a:1"), q.option())
	b := newSem(t, srv.Client(nil), "inspect", 2, semaphore.WithHolder("host-b:2"))
	pa, pb := try(t, a, time.Minute), try(t, b, 30*time.Second)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := a.Acquire(wctx, time.Minute); done <- err }()
	q.wait(t, 1)
	info, err := b.Inspect(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, info.Limit, "Inspect = %+v", info)
	require.Equal(t, 1, info.Waiters, "Inspect = %+v", info)
	require.Len(t, info.Holders, 2, "Inspect = %+v", info)
	for i, want := range []struct {
		p      *semaphore.Permit
		holder string
		ttl    time.Duration
	}{{pa, "host-a:1", time.Minute}, {pb, "host-b:2", 30 * time.Second}} {
		h := info.Holders[i]
		assert.False(t, h.Slot != want.p.Slot() || h.Fence != want.p.Fence() || h.Holder != want.holder || h.TTL <= 0 || h.TTL > want.ttl || h.Age < 0, "holder %d = %+v, want slot %d fence %d %q", i, h, want.p.Slot(), want.p.Fence(), want.holder)
	}
	cancel()
	if err := <-done; !errors.Is(err, lease.ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Acquire: %v, want ErrNotObtained and context.Canceled", err)
	}
	if info, _ := b.Inspect(ctx); info.Waiters != 0 {
		t.Errorf("%d waiters after the cancelled one withdrew", info.Waiters)
	}
}

// Every key a semaphore writes has an expiry, and all are gone once no
// one holds or waits (except the fence counter, kept for the last lease's
// TTL, at least 1 s).
func TestKeysExpire(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	q := watchQueued()
	s := newSem(t, rdb, "keys{x}", 1, q.option()) // a brace in the name: still one slot
	ctx := context.Background()
	p := try(t, s, time.Minute)
	noPersistent := func(when string) []string {
		keys, err := rdb.Keys(ctx, "*").Result()
		require.NoError(t, err)
		for _, k := range keys {
			if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 {
				t.Errorf("%s: key %q has no expiry (PTTL %v)", when, k, ttl)
			}
		}
		return keys
	}
	noPersistent("after a grant")
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := s.Acquire(wctx, time.Minute); done <- err }()
	q.wait(t, 1)
	keys := noPersistent("with a waiter")
	assert.Len(t, keys, 5, "keys %v, want state, holders, queue, qdead and fence", keys)
	for _, k := range keys {
		assert.True(t, strings.HasPrefix(k, semaphore.DefaultPrefix+"{keys{x%7D}"), "key %q is not hash-tagged by the name", k)
	}
	cancel()
	<-done
	noPersistent("after the waiter left")
	require.NoError(t, p.Release(ctx))
	left, _ := rdb.Keys(ctx, "*").Result()
	assert.False(t, len(left) != 1 || !strings.HasSuffix(left[0], ":fence"), "keys left when idle: %v, want only the fence counter", left)
	if d := rdb.PTTL(ctx, left[0]).Val(); d <= 0 || d > time.Minute {
		t.Errorf("fence counter's TTL %v, want the lease's (1 min)", d)
	}
}

// A flushed script cache is reloaded (EVALSHA falls back to EVAL).
func TestScriptFlush(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newSem(t, srv.Client(nil), "flush", 1)
	p := try(t, s, time.Minute)
	_, err := srv.Do("SCRIPT", "FLUSH")
	require.NoError(t, err)
	assert.NoError(t, p.Refresh(context.Background(), time.Minute), "Refresh after SCRIPT FLUSH")
}

// Users of one name must agree on its limit while it is in use.
func TestLimitMismatch(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	p := try(t, newSem(t, srv.Client(nil), "mismatch", 2), time.Minute)
	other := newSem(t, srv.Client(nil), "mismatch", 3)
	_, err := other.Acquire(ctx, time.Minute)
	var le *semaphore.LimitError
	require.ErrorIs(t, err, semaphore.ErrLimitMismatch, "Acquire with another limit")
	require.True(t, errors.As(err, &le), "Acquire with another limit: %v", err)
	require.Equal(t, 2, le.InUse, "Acquire with another limit: %v", err)
	require.Equal(t, 3, le.Limit, "Acquire with another limit: %v", err)
	require.NoError(t, p.Release(ctx))
	_, err = other.TryAcquire(ctx, time.Minute)
	assert.NoError(t, err, "once idle, another limit may take over")
}

// A waiting Acquire ends at Close, withdrawn from the queue.
func TestClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	q := watchQueued()
	ctx := context.Background()
	held := try(t, newSem(t, srv.Client(nil), "close", 1), time.Minute)
	s, err := semaphore.New(srv.Client(nil), "close", 1, q.option())
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { _, err := s.Acquire(ctx, time.Minute); done <- err }()
	q.wait(t, 2)
	require.NoError(t, s.Close())
	assert.ErrorIs(t, <-done, lease.ErrClosed, "Acquire at Close, want ErrClosed")
	_, err = s.Acquire(ctx, time.Minute)
	assert.ErrorIs(t, err, lease.ErrClosed, "Acquire after Close, want ErrClosed")
	assert.NoError(t, s.Close(), "second Close")
	assert.NoError(t, held.Release(ctx))
}

func TestInvalidInput(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	for name, f := range map[string]func() error{
		"nil client":    func() error { _, err := semaphore.New(nil, "x", 1); return err },
		"typed nil":     func() error { _, err := semaphore.New((*redis.Client)(nil), "x", 1); return err },
		"empty name":    func() error { _, err := semaphore.New(rdb, "", 1); return err },
		"limit 0":       func() error { _, err := semaphore.New(rdb, "x", 0); return err },
		"limit too big": func() error { _, err := semaphore.New(rdb, "x", semaphore.MaxLimit+1); return err },
		"brace prefix":  func() error { _, err := semaphore.New(rdb, "x", 1, semaphore.WithPrefix("a{")); return err },
		"drift 1":       func() error { _, err := semaphore.New(rdb, "x", 1, semaphore.WithDriftFactor(1)); return err },
		"queue TTL 1ms": func() error {
			_, err := semaphore.New(rdb, "x", 1, semaphore.WithQueueTTL(time.Millisecond))
			return err
		},
		"release 0": func() error { _, err := semaphore.New(rdb, "x", 1, semaphore.WithReleaseTimeout(0)); return err },
		"long holder": func() error {
			_, err := semaphore.New(rdb, "x", 1, semaphore.WithHolder(strings.Repeat("h", 300)))
			return err
		},
	} {
		assert.ErrorIs(t, f(), lease.ErrInvalidArgument, "%s, want ErrInvalidArgument", name)
	}
	s := newSem(t, rdb, "x", 1)
	ctx := context.Background()
	for _, ttl := range []time.Duration{0, time.Microsecond, 2 * time.Millisecond} {
		_, err := s.Acquire(ctx, ttl)
		assert.ErrorIs(t, err, lease.ErrInvalidArgument, "Acquire(ttl %v)", ttl)
	}
	p := try(t, s, time.Minute)
	assert.ErrorIs(t, p.Refresh(ctx, 0), lease.ErrInvalidArgument, "Refresh(0)")
	var nilPermit *semaphore.Permit
	assert.ErrorIs(t, nilPermit.Release(ctx), lease.ErrNotHeld, "nil Release")
	assert.ErrorIs(t, nilPermit.Refresh(ctx, time.Second), lease.ErrNotHeld, "nil Refresh")
	if _, err := nilPermit.TTL(ctx); !errors.Is(err, lease.ErrNotHeld) || nilPermit.Fence() != 0 || !nilPermit.ValidUntil().IsZero() {
		t.Errorf("nil TTL: %v", err)
	}
}

// An unreachable Redis is an error, never ErrNotObtained.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	s := newSem(t, rdb, "down", 1)
	srv.Kill()
	_, err := s.TryAcquire(context.Background(), time.Second)
	assert.False(t, err == nil || errors.Is(err, lease.ErrNotObtained), "TryAcquire on a dead Redis: %v", err)
}

// A permit whose lease ended on the server cannot be renewed, even when no
// one has taken its slot yet (nothing purged it).
func TestExpiredPermitCannotRefresh(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newSem(t, srv.Client(nil), "expired", 2)
	ctx := context.Background()
	// p's lease is long, then ended on the server (its end in the holders
	// set moved into the past): a short TTL would race the grant's own
	// confirmation on a loaded machine, and a sleep would race the clock.
	p := try(t, s, time.Minute)
	other := try(t, s, time.Minute) // keeps the keys alive: only the scripts judge p
	endLease(t, srv, s, p)
	assert.ErrorIs(t, p.Refresh(ctx, time.Minute), lease.ErrNotHeld, "Refresh after the lease ended, want ErrNotHeld")
	_, err := p.TTL(ctx)
	assert.ErrorIs(t, err, lease.ErrNotHeld, "TTL after the lease ended, want ErrNotHeld")
	if info, _ := s.Inspect(ctx); len(info.Holders) != 1 || info.Holders[0].Fence != other.Fence() {
		t.Errorf("Inspect lists %+v after the lease ended, want only the live permit", info.Holders)
	}
}

// endLease moves the end of p's lease (its score in the holders set, in
// server ms) to the epoch, as if its TTL had run out; the scripts judge it
// against the server's TIME as they judge any lease.
func endLease(t *testing.T, srv *redistest.Server, s *semaphore.Semaphore, p *semaphore.Permit) {
	t.Helper()
	setLeaseEnd(t, srv, s, p, 1)
}

// serverMillis returns the server's TIME in ms.
func serverMillis(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	r, err := srv.Do("TIME")
	require.NoError(t, err)
	l, _ := r.([]any)
	require.Len(t, l, 2, "TIME = %v", r)
	sec, err := strconv.ParseInt(fmt.Sprint(l[0]), 10, 64)
	require.NoError(t, err)
	usec, err := strconv.ParseInt(fmt.Sprint(l[1]), 10, 64)
	require.NoError(t, err)
	return sec*1000 + usec/1000
}

// setLeaseEnd sets the end of p's lease to endMs (server ms), as a TTL
// would have.
func setLeaseEnd(t *testing.T, srv *redistest.Server, s *semaphore.Semaphore, p *semaphore.Permit, endMs int64) {
	t.Helper()
	keys := semaphore.Keys(s)
	r, err := srv.Do("HGETALL", keys[0])
	require.NoError(t, err)
	fields, _ := r.([]any)
	if m, ok := r.(map[any]any); ok {
		for k, v := range m {
			fields = append(fields, k, v)
		}
	}
	for i := 0; i+1 < len(fields); i += 2 {
		f, _ := fields[i].(string)
		v, _ := fields[i+1].(string)
		// "t<token>" -> "<slot>:<fence>:<acquired ms>:<holder>"
		if parts := strings.SplitN(v, ":", 3); strings.HasPrefix(f, "t") && len(parts) == 3 && parts[1] == strconv.FormatInt(p.Fence(), 10) {
			if n, err := srv.Do("ZADD", keys[1], "XX", "CH", strconv.FormatInt(endMs, 10), f[1:]); err != nil || n != int64(1) {
				t.Fatalf("ZADD: %v, %v", n, err)
			}
			return
		}
	}
	t.Fatalf("no holder with fence %d in %v", p.Fence(), fields)
}

// A permit taken away behind its holder's back (an operator's DEL) is
// reported lost by lease.RunLock: the work's ctx ends with ErrLockLost.
func TestRunLockReportsLoss(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newSem(t, srv.Client(nil), "lost", 2)
	ctx := context.Background()
	// A long lease renewed often: the loss is found by a renewal, never
	// raced by the lease running out on a loaded machine.
	p := try(t, s, time.Minute)
	err := lease.RunLock(ctx, p, time.Minute, func(ctx context.Context) error {
		if _, err := srv.Do("DEL", semaphore.Keys(s)[1]); err != nil { // the holders
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(waitBound):
			return errors.New("the loss was not noticed")
		}
	}, lease.WithRefreshInterval(20*time.Millisecond))
	assert.False(t, !errors.Is(err, lease.ErrLockLost) || !errors.Is(err, lease.ErrNotHeld), "RunLock = %v, want ErrLockLost caused by ErrNotHeld", err)
}
