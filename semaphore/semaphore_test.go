package semaphore_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/semaphore"
)

const waitBound = 20 * time.Second

func newSem(t testing.TB, rdb redis.UniversalClient, name string, limit int, opts ...semaphore.Option) *semaphore.Semaphore {
	t.Helper()
	s, err := semaphore.New(rdb, name, limit, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func try(t testing.TB, s *semaphore.Semaphore, ttl time.Duration) *semaphore.Permit {
	t.Helper()
	p, err := s.TryAcquire(context.Background(), ttl)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
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
		if p.Slot() != i || p.Key() != "limit" || len(p.Token()) < 26 {
			t.Errorf("permit %d: slot %d, key %q, token %q", i, p.Slot(), p.Key(), p.Token())
		}
		if i > 0 && p.Fence() <= ps[i-1].Fence() {
			t.Errorf("fence %d after %d", p.Fence(), ps[i-1].Fence())
		}
		ps = append(ps, p)
	}
	if _, err := s.TryAcquire(ctx, time.Minute); !errors.Is(err, lease.ErrNotObtained) {
		t.Fatalf("fifth TryAcquire: %v, want ErrNotObtained", err)
	}
	if err := ps[2].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ps[2].Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("second Release: %v, want ErrNotHeld", err)
	}
	p := try(t, s, time.Minute)
	if p.Slot() != 2 || p.Fence() <= ps[3].Fence() {
		t.Errorf("after a release: slot %d fence %d, want slot 2 and a new fence", p.Slot(), p.Fence())
	}
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
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
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
	if !slices.Equal(order, []int{0, 1, 2, 3, 4}) {
		t.Errorf("grant order %v, want arrival order", order)
	}
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
	dead := try(t, newSem(t, srv.Client(nil), "dead", 1), 200*time.Millisecond)
	s := newSem(t, srv.Client(nil), "dead", 1)
	actx, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	p, err := s.Acquire(actx, time.Minute)
	if err != nil {
		t.Fatalf("Acquire behind a dead holder: %v", err)
	}
	if p.Fence() <= dead.Fence() {
		t.Errorf("successor fence %d <= dead holder's %d", p.Fence(), dead.Fence())
	}
	if err := dead.Refresh(ctx, time.Minute); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("dead holder's Refresh: %v, want ErrNotHeld", err)
	}
	if !dead.ValidUntil().IsZero() {
		t.Error("dead holder's ValidUntil is not zero after ErrNotHeld")
	}
	if err := dead.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("dead holder's Release: %v, want ErrNotHeld", err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
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
		if !next.After(until) {
			t.Fatalf("renewal %d: valid until %v, not after %v", i, next, until)
		}
		until = next
	}
	if d, err := p.TTL(ctx); err != nil || d <= 0 || d > ttl {
		t.Fatalf("TTL on the server after the renewals: %v, %v", d, err)
	}
	if _, err := s.TryAcquire(ctx, time.Second); !errors.Is(err, lease.ErrNotObtained) {
		t.Errorf("TryAcquire while held: %v", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if p.ValidUntil().IsZero() == false {
		t.Error("ValidUntil after Release is not zero")
	}
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
	if err != nil {
		t.Fatal(err)
	}
	if info.Limit != 2 || info.Waiters != 1 || len(info.Holders) != 2 {
		t.Fatalf("Inspect = %+v", info)
	}
	for i, want := range []struct {
		p      *semaphore.Permit
		holder string
		ttl    time.Duration
	}{{pa, "host-a:1", time.Minute}, {pb, "host-b:2", 30 * time.Second}} {
		h := info.Holders[i]
		if h.Slot != want.p.Slot() || h.Fence != want.p.Fence() || h.Holder != want.holder || h.TTL <= 0 || h.TTL > want.ttl || h.Age < 0 {
			t.Errorf("holder %d = %+v, want slot %d fence %d %q", i, h, want.p.Slot(), want.p.Fence(), want.holder)
		}
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
		if err != nil {
			t.Fatal(err)
		}
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
	if len(keys) != 5 {
		t.Errorf("keys %v, want state, holders, queue, qdead and fence", keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, semaphore.DefaultPrefix+"{keys{x%7D}") {
			t.Errorf("key %q is not hash-tagged by the name", k)
		}
	}
	cancel()
	<-done
	noPersistent("after the waiter left")
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	left, _ := rdb.Keys(ctx, "*").Result()
	if len(left) != 1 || !strings.HasSuffix(left[0], ":fence") {
		t.Errorf("keys left when idle: %v, want only the fence counter", left)
	}
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
	if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(context.Background(), time.Minute); err != nil {
		t.Errorf("Refresh after SCRIPT FLUSH: %v", err)
	}
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
	if !errors.Is(err, semaphore.ErrLimitMismatch) || !errors.As(err, &le) || le.InUse != 2 || le.Limit != 3 {
		t.Fatalf("Acquire with another limit: %v", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryAcquire(ctx, time.Minute); err != nil {
		t.Errorf("once idle, another limit may take over: %v", err)
	}
}

// A waiting Acquire ends at Close, withdrawn from the queue.
func TestClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	q := watchQueued()
	ctx := context.Background()
	held := try(t, newSem(t, srv.Client(nil), "close", 1), time.Minute)
	s, err := semaphore.New(srv.Client(nil), "close", 1, q.option())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Acquire(ctx, time.Minute); done <- err }()
	q.wait(t, 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, lease.ErrClosed) {
		t.Errorf("Acquire at Close: %v, want ErrClosed", err)
	}
	if _, err := s.Acquire(ctx, time.Minute); !errors.Is(err, lease.ErrClosed) {
		t.Errorf("Acquire after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Error(err)
	}
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
		if err := f(); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	s := newSem(t, rdb, "x", 1)
	ctx := context.Background()
	for _, ttl := range []time.Duration{0, time.Microsecond, 2 * time.Millisecond} {
		if _, err := s.Acquire(ctx, ttl); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("Acquire(ttl %v): %v", ttl, err)
		}
	}
	p := try(t, s, time.Minute)
	if err := p.Refresh(ctx, 0); !errors.Is(err, lease.ErrInvalidArgument) {
		t.Errorf("Refresh(0): %v", err)
	}
	var nilPermit *semaphore.Permit
	if err := nilPermit.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("nil Release: %v", err)
	}
	if err := nilPermit.Refresh(ctx, time.Second); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("nil Refresh: %v", err)
	}
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
	if err == nil || errors.Is(err, lease.ErrNotObtained) {
		t.Errorf("TryAcquire on a dead Redis: %v", err)
	}
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
	if err := p.Refresh(ctx, time.Minute); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Refresh after the lease ended: %v, want ErrNotHeld", err)
	}
	if _, err := p.TTL(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("TTL after the lease ended: %v, want ErrNotHeld", err)
	}
	if info, _ := s.Inspect(ctx); len(info.Holders) != 1 || info.Holders[0].Fence != other.Fence() {
		t.Errorf("Inspect lists %+v after the lease ended, want only the live permit", info.Holders)
	}
}

// endLease moves the end of p's lease (its score in the holders set, in
// server ms) to the epoch, as if its TTL had run out; the scripts judge it
// against the server's TIME as they judge any lease.
func endLease(t *testing.T, srv *redistest.Server, s *semaphore.Semaphore, p *semaphore.Permit) {
	t.Helper()
	keys := semaphore.Keys(s)
	r, err := srv.Do("HGETALL", keys[0])
	if err != nil {
		t.Fatal(err)
	}
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
			if n, err := srv.Do("ZADD", keys[1], "XX", "CH", "1", f[1:]); err != nil || n != int64(1) {
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
	// The first renewal (a third of the TTL in) finds the permit gone; the
	// TTL leaves it two thirds of a TTL before the validity's end would
	// report an expiry instead, room for a machine under load.
	const ttl = 3 * time.Second
	p := try(t, s, ttl)
	err := lease.RunLock(ctx, p, ttl, func(ctx context.Context) error {
		if _, err := srv.Do("DEL", semaphore.Keys(s)[1]); err != nil { // the holders
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(waitBound):
			return errors.New("the loss was not noticed")
		}
	})
	if !errors.Is(err, lease.ErrLockLost) || !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("RunLock = %v, want ErrLockLost caused by ErrNotHeld", err)
	}
}
