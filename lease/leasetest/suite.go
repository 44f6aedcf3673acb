// Package leasetest is the conformance suite of the lease contract, which
// every lock backend runs (in the style of x/net's nettest.TestConn), and an
// in-memory Locker and Store with an injectable clock (Memory, FakeClock)
// for fast, deterministic tests of code built on locks.
//
// A backend's test calls Run with a function that sets up a fresh backend
// for each case:
//
//	func TestLease(t *testing.T) {
//		leasetest.Run(t, func(t *testing.T) leasetest.Env {
//			m := leasetest.NewMemory()
//			return leasetest.Env{Locker: m, Store: m, Break: m.Break}
//		})
//	}
package leasetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// Env is one backend under test.
type Env struct {
	// Locker is the backend's Locker.
	Locker lease.Locker
	// Other, if set, is a second client of the same backend (another
	// process, in effect): grants of one must exclude grants of the other.
	// Default: Locker.
	Other lease.Locker
	// Store, if set, is tested as a lease.Store.
	Store lease.Store
	// Break deletes the lock on key behind its holder's back (an operator's
	// DEL, an eviction), so that its next renewal finds it gone.
	Break func(key string)
	// Sleep lets d pass on the backend's clock. Default: time.Sleep; for a
	// FakeClock, its Advance.
	Sleep func(d time.Duration)
	// Now is the backend's clock, for the validity checks. Default:
	// time.Now.
	Now func() time.Time
	// TTL is the lease of the cases that wait for an expiry. Default:
	// 300 ms; it must leave room for a few round trips to the backend.
	TTL time.Duration
}

func (e *Env) defaults() {
	if e.Other == nil {
		e.Other = e.Locker
	}
	if e.Sleep == nil {
		e.Sleep = time.Sleep
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	if e.TTL == 0 {
		e.TTL = 300 * time.Millisecond
	}
}

// Run runs the conformance suite: each case in a parallel subtest, on a
// backend that setup makes for it (setup must give each case a backend of
// its own, or keys of its own: the suite's keys differ by case).
func Run(t *testing.T, setup func(t *testing.T) Env) {
	cases := []struct {
		name string
		fn   func(t *testing.T, e Env, key string)
	}{
		{"InvalidInput", testInvalidInput},
		{"Exclusion", testExclusion},
		{"MutualExclusion", testMutualExclusion},
		{"Ownership", testOwnership},
		{"Expiry", testExpiry},
		{"Fences", testFences},
		{"Validity", testValidity},
		{"Waiting", testWaiting},
		{"WaitEndsWithContext", testWaitEndsWithContext},
		{"Inspect", testInspect},
		{"HoldDetectsLoss", testHoldDetectsLoss},
		{"HoldEndsOnRelease", testHoldEndsOnRelease},
		{"Run", testRun},
		{"RunReleasedByFn", testRunReleasedByFn},
		{"RunDetectsLoss", testRunDetectsLoss},
		{"RunReleasesOnPanic", testRunReleasesOnPanic},
		{"Store", testStore},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			e.defaults()
			key := "leasetest:" + strings.ReplaceAll(t.Name(), "/", ":")
			c.fn(t, e, key)
		})
	}
}

func testInvalidInput(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	for _, c := range []struct {
		name string
		key  string
		ttl  time.Duration
		opts []lease.Option
	}{
		{"empty key", "", time.Second, nil},
		{"zero TTL", key, 0, nil},
		{"negative TTL", key, -time.Second, nil},
		{"TTL below 1ms", key, 500 * time.Microsecond, nil},
		{"TTL within drift", key, 2 * time.Millisecond, nil},
		{"TTL above MaxTTL", key, lease.MaxTTL + time.Millisecond, nil},
		{"nil retry", key, time.Second, []lease.Option{lease.WithRetry(nil)}},
		{"bad retry", key, time.Second, []lease.Option{lease.WithRetry(lease.LinearBackoff(0))}},
		{"long holder", key, time.Second, []lease.Option{lease.WithHolder(strings.Repeat("h", lease.MaxHolderLen+1))}},
	} {
		l, err := e.Locker.Obtain(ctx, c.key, c.ttl, c.opts...)
		if l != nil {
			_ = l.Release(ctx)
		}
		wantIs(t, "Obtain with "+c.name, err, lease.ErrInvalidArgument)
	}
	l := mustObtain(t, e.Locker, key, time.Second)
	wantIs(t, "Refresh(0)", l.Refresh(ctx, 0), lease.ErrInvalidArgument)
	wantIs(t, "Refresh(-1s)", l.Refresh(ctx, -time.Second), lease.ErrInvalidArgument)
	wantIs(t, "Refresh above MaxTTL", l.Refresh(ctx, lease.MaxTTL+time.Millisecond), lease.ErrInvalidArgument)
	if err := l.Refresh(ctx, time.Second); err != nil {
		t.Fatalf("Refresh after refused ones: %v", err)
	}
	wantIs(t, "Run(nil fn)", lease.Run(ctx, e.Locker, key+":run", time.Second, nil), lease.ErrInvalidArgument)
	wantIs(t, "Run with an interval above the TTL", lease.Run(ctx, e.Locker, key+":run", time.Second,
		func(context.Context, lease.Lock) error { return nil }, lease.WithRefreshInterval(2*time.Second)), lease.ErrInvalidArgument)
}

func testExclusion(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	a := mustObtain(t, e.Locker, key, 10*time.Second)
	for _, lk := range []lease.Locker{e.Locker, e.Other} {
		l, err := lk.Obtain(ctx, key, 10*time.Second)
		if l != nil {
			t.Fatalf("a second grant of a held lock: %v and %v", a.Token(), l.Token())
		}
		wantIs(t, "Obtain of a held lock", err, lease.ErrNotObtained)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	b := obtainAfterRelease(t, e.Other, key, 10*time.Second)
	if b.Token() == a.Token() || b.Token() == "" {
		t.Fatalf("tokens: %q after %q; want distinct, non-empty", b.Token(), a.Token())
	}
	if b.Key() != key {
		t.Fatalf("Key() = %q, want %q", b.Key(), key)
	}
}

func testMutualExclusion(t *testing.T, e Env, key string) {
	lockers := []lease.Locker{e.Locker, e.Other}
	i := 0
	var mu sync.Mutex
	Exclusion(t, 8, 10, func(ctx context.Context) (func(), error) {
		mu.Lock()
		lk := lockers[i%2]
		i++
		mu.Unlock()
		l, err := lk.Obtain(ctx, key, 10*time.Second, lease.WithRetry(lease.LinearBackoff(5*time.Millisecond)))
		if err != nil {
			return nil, err
		}
		return func() {
			if err := l.Release(context.Background()); err != nil {
				t.Errorf("Release: %v", err)
			}
		}, nil
	})
}

func testOwnership(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	stale := mustObtain(t, e.Locker, key, e.TTL)
	e.Sleep(e.TTL + e.TTL/2)
	fresh := mustObtain(t, e.Other, key, 10*time.Second)
	wantIs(t, "Refresh by the stale holder", stale.Refresh(ctx, 10*time.Second), lease.ErrNotHeld)
	wantIs(t, "Release by the stale holder", stale.Release(ctx), lease.ErrNotHeld)
	if !stale.ValidUntil().IsZero() {
		t.Errorf("stale ValidUntil = %v after ErrNotHeld, want the zero Time", stale.ValidUntil())
	}
	info, err := e.Locker.Inspect(ctx, key)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if !info.Held || info.Fence != fresh.Fence() {
		t.Fatalf("after the stale holder's calls: %+v, want held with fence %d", info, fresh.Fence())
	}
	if err := fresh.Refresh(ctx, 10*time.Second); err != nil {
		t.Fatalf("Refresh by the holder: %v", err)
	}
	if err := fresh.Release(ctx); err != nil {
		t.Fatalf("Release by the holder: %v", err)
	}
	wantIs(t, "second Release", fresh.Release(ctx), lease.ErrNotHeld)
	wantIs(t, "Refresh after Release", fresh.Refresh(ctx, time.Second), lease.ErrNotHeld)
}

func testExpiry(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	mustObtain(t, e.Locker, key, e.TTL)
	if _, err := e.Other.Obtain(ctx, key, e.TTL); !errors.Is(err, lease.ErrNotObtained) {
		t.Fatalf("Obtain before expiry: %v, want ErrNotObtained", err)
	}
	e.Sleep(e.TTL + e.TTL/2)
	mustObtain(t, e.Other, key, e.TTL)
}

func testFences(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	var last int64
	check := func(l lease.Lock, how string) {
		t.Helper()
		if l.Fence() <= last {
			t.Fatalf("fence %d after %d (%s): fences must increase", l.Fence(), last, how)
		}
		last = l.Fence()
	}
	for i := range 6 {
		lk := []lease.Locker{e.Locker, e.Other}[i%2]
		l, err := lk.Obtain(ctx, key, 10*time.Second)
		if err != nil {
			t.Fatalf("Obtain %d: %v", i, err)
		}
		check(l, "after a release")
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
	}
	mustObtain(t, e.Locker, key, e.TTL)
	e.Sleep(e.TTL + e.TTL/2)
	check(mustObtain(t, e.Other, key, e.TTL), "after an expiry")
	other := mustObtain(t, e.Locker, key+":other", 10*time.Second)
	if other.Fence() <= 0 {
		t.Fatalf("fence %d of another key: must be positive", other.Fence())
	}
}

func testValidity(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	ttl := 10 * time.Second
	slack := ttl/20 + 2*time.Millisecond // drift factors up to 5 %
	// The bounds are those of the try that granted it: a try whose
	// outcome is unknown (a loaded machine) is made again.
	var start, end time.Time
	var l lease.Lock
	for l == nil {
		var err error
		start = e.Now()
		l, err = e.Locker.Obtain(ctx, key, ttl)
		end = e.Now()
		if err != nil && (!unknownOutcome(err) || ctx.Err() != nil) {
			t.Fatalf("Obtain: %v", err)
		}
	}
	defer l.Release(context.Background())
	until := l.ValidUntil()
	if until.After(end.Add(ttl)) || until.Before(start.Add(ttl-slack)) {
		t.Fatalf("ValidUntil = start%+v, want within [start+TTL-%v, end+TTL] (end = start%+v)",
			until.Sub(start), slack, end.Sub(start))
	}
	if until.After(start.Add(ttl)) {
		t.Fatalf("ValidUntil = start%+v: beyond request start + TTL", until.Sub(start))
	}
	e.Sleep(20 * time.Millisecond)
	start = e.Now()
	if err := l.Refresh(ctx, ttl); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if got := l.ValidUntil(); !got.After(until) || got.Before(start.Add(ttl-slack)) {
		t.Fatalf("ValidUntil after Refresh = start%+v, want later than before and within [start+TTL-%v, ...]", got.Sub(start), slack)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if !l.ValidUntil().IsZero() {
		t.Fatalf("ValidUntil after Release = %v, want the zero Time", l.ValidUntil())
	}
}

func testWaiting(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	holder := mustObtain(t, e.Locker, key, 10*time.Second)
	got := make(chan error, 1)
	var waiter lease.Lock
	go func() {
		l, err := e.Other.Obtain(ctx, key, 10*time.Second, lease.WithRetry(lease.LinearBackoff(5*time.Millisecond)))
		waiter = l
		got <- err
	}()
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v, want the lock once released", err)
	}
	if waiter.Fence() <= holder.Fence() {
		t.Fatalf("waiter's fence %d after %d", waiter.Fence(), holder.Fence())
	}
	_ = waiter.Release(ctx)
}

func testWaitEndsWithContext(t *testing.T, e Env, key string) {
	mustObtain(t, e.Locker, key, 10*time.Second)
	// A first attempt cut short by the ctx reports its own error, not
	// contention: warm Other up (connections, scripts, a cluster's slots)
	// with one attempt, and give the waiting call a deadline that its
	// first attempt meets on a loaded machine.
	if _, err := e.Other.Obtain(ctxFor(t), key, 10*time.Second); !errors.Is(err, lease.ErrNotObtained) {
		t.Fatalf("Obtain of a held lock: %v, want ErrNotObtained", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l, err := e.Other.Obtain(ctx, key, 10*time.Second, lease.WithRetry(lease.LinearBackoff(10*time.Millisecond)))
	if l != nil {
		t.Fatal("granted a held lock")
	}
	wantIs(t, "Obtain until the ctx deadline", err, lease.ErrNotObtained, context.DeadlineExceeded)
}

func testInspect(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	info, err := e.Locker.Inspect(ctx, key)
	if err != nil || info.Held {
		t.Fatalf("Inspect of a free key: %+v, %v", info, err)
	}
	ttl := 10 * time.Second
	l := mustObtain(t, e.Locker, key, ttl, lease.WithHolder("worker-7@host:42"))
	info, err = e.Other.Inspect(ctx, key)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if !info.Held || info.Holder != "worker-7@host:42" || info.Fence != l.Fence() || info.TTL <= 0 || info.TTL > ttl {
		t.Fatalf("Inspect of a held key: %+v, want held by worker-7@host:42 with fence %d and TTL in (0, %v]", info, l.Fence(), ttl)
	}
	anon := mustObtain(t, e.Locker, key+":anon", ttl)
	if info, err := e.Locker.Inspect(ctx, key+":anon"); err != nil || info.Holder != "" || info.Fence != anon.Fence() {
		t.Fatalf("Inspect of a lock without holder: %+v, %v", info, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := e.Locker.Inspect(ctx, key); err != nil || info.Held {
		t.Fatalf("Inspect after Release: %+v, %v", info, err)
	}
	wantIs(t, "Inspect(\"\")", func() error { _, err := e.Locker.Inspect(ctx, ""); return err }(), lease.ErrInvalidArgument)
}

func testRun(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	errFn := errors.New("fn failed")
	var fence int64
	err := lease.Run(ctx, e.Locker, key, time.Second, func(ctx context.Context, l lease.Lock) error {
		if ctx.Err() != nil {
			t.Errorf("fn's ctx done at start: %v", ctx.Err())
		}
		if _, err := e.Other.Obtain(ctx, key, time.Second); !errors.Is(err, lease.ErrNotObtained) {
			t.Errorf("Obtain while Run holds the lock: %v", err)
		}
		fence = l.Fence()
		return errFn
	})
	if !errors.Is(err, errFn) || errors.Is(err, lease.ErrLockLost) {
		t.Fatalf("Run: %v, want fn's error alone", err)
	}
	l := obtainAfterRelease(t, e.Other, key, time.Second)
	if l.Fence() <= fence {
		t.Fatalf("fence %d after Run's %d", l.Fence(), fence)
	}
}

func testRunDetectsLoss(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	interval := 100 * time.Millisecond
	errFn := errors.New("fn stopped")
	err := lease.Run(ctx, e.Locker, key, 2*time.Second, func(ctx context.Context, l lease.Lock) error {
		e.Break(key)
		e.Sleep(interval + interval/2)
		<-ctx.Done()
		return errFn
	}, lease.WithRefreshInterval(interval))
	wantIs(t, "Run after a loss", err, lease.ErrLockLost, lease.ErrNotHeld, errFn)
}

func testRunReleasesOnPanic(t *testing.T, e Env, key string) {
	ctx := ctxFor(t)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the panic of fn", r)
			}
		}()
		_ = lease.Run(ctx, e.Locker, key, 10*time.Second, func(context.Context, lease.Lock) error { panic("boom") })
	}()
	// Released: another client gets it with a single attempt.
	mustObtain(t, e.Other, key, time.Second)
}

func testStore(t *testing.T, e Env, key string) {
	s := e.Store
	if s == nil {
		t.Skip("Env.Store not set: no lease.Store to test")
	}
	ctx := ctxFor(t)
	if _, err := s.Get(ctx, key); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Get of a missing record: %v, want ErrNotFound", err)
	}
	if err := s.Put(ctx, key, []byte("v5"), 5, 0); err != nil {
		t.Fatalf("Put: %v", err)
	}
	wantIs(t, "Put with a lower fence", s.Put(ctx, key, []byte("v4"), 4, 0), lease.ErrStaleFence)
	if r, err := s.Get(ctx, key); err != nil || string(r.Value) != "v5" || r.Fence != 5 || r.TTL != 0 {
		t.Fatalf("Get after a stale Put: %+v, %v; want v5 at fence 5 without TTL", r, err)
	}
	if err := s.Put(ctx, key, []byte("v5b"), 5, 0); err != nil {
		t.Fatalf("Put with the same fence: %v", err)
	}
	bin := []byte{0, 1, 0xff, '\n', '}'}
	if err := s.Put(ctx, key, bin, 9, 10*time.Second); err != nil {
		t.Fatalf("Put with a higher fence: %v", err)
	}
	if r, err := s.Get(ctx, key); err != nil || string(r.Value) != string(bin) || r.Fence != 9 || r.TTL <= 0 || r.TTL > 10*time.Second {
		t.Fatalf("Get: %+v, %v; want the binary value at fence 9 with a TTL", r, err)
	}
	wantIs(t, "Delete with a lower fence", s.Delete(ctx, key, 8), lease.ErrStaleFence)
	if err := s.Delete(ctx, key, 9); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if err := s.Delete(ctx, key, 1); err != nil {
		t.Fatalf("Delete of a missing record: %v", err)
	}
	if err := s.Put(ctx, key, []byte("short"), 10, e.TTL); err != nil {
		t.Fatal(err)
	}
	e.Sleep(e.TTL + e.TTL/2)
	if _, err := s.Get(ctx, key); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Get after the record's TTL: %v", err)
	}
	for name, err := range map[string]error{
		"Put empty key": s.Put(ctx, "", nil, 1, 0),
		"Put fence 0":   s.Put(ctx, key, nil, 0, 0),
		"Put TTL < 0":   s.Put(ctx, key, nil, 1, -time.Second),
		"Get empty key": func() error { _, err := s.Get(ctx, ""); return err }(),
	} {
		wantIs(t, name, err, lease.ErrInvalidArgument)
	}
}
