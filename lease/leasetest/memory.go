package leasetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
)

// Memory is an in-memory lease.Locker and lease.Store for fast,
// deterministic tests of code built on locks. Leases expire on its clock
// (WithClock; default the real one), fences increase per key, releases wake
// waiters at once, and Break takes a lock away from its holder. It is safe
// for concurrent use; the zero value is not: use NewMemory.
type Memory struct {
	clock lease.Clock
	drift float64

	mu      sync.Mutex
	locks   map[string]*grant
	fences  map[string]int64
	records map[string]*stored
	changed chan struct{} // closed and replaced when a lock is released or broken
}

type grant struct {
	token   string
	fence   int64
	holder  string
	expires time.Time
}

type stored struct {
	rec     lease.Record
	expires time.Time // zero: none
}

// MemoryOption configures a Memory.
type MemoryOption func(*Memory)

// WithClock sets the clock that leases and records expire on.
func WithClock(c lease.Clock) MemoryOption { return func(m *Memory) { m.clock = c } }

// WithDriftFactor sets the share of a TTL that ValidUntil gives up for
// clock drift (default lease.DefaultDriftFactor; 2 ms are always added).
func WithDriftFactor(f float64) MemoryOption { return func(m *Memory) { m.drift = f } }

// NewMemory returns an empty Memory.
func NewMemory(opts ...MemoryOption) *Memory {
	m := &Memory{
		clock:   realClock{},
		drift:   lease.DefaultDriftFactor,
		locks:   make(map[string]*grant),
		fences:  make(map[string]int64),
		records: make(map[string]*stored),
		changed: make(chan struct{}),
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

type realClock struct{}

func (realClock) Now() time.Time                                  { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) lease.Timer { return time.AfterFunc(d, f) }

var (
	_ lease.Locker = (*Memory)(nil)
	_ lease.Store  = (*Memory)(nil)
	_ lease.Keeper = (*memLock)(nil)
)

// held returns the live grant of key; an expired one is dropped. m.mu held.
func (m *Memory) held(key string, now time.Time) *grant {
	g := m.locks[key]
	if g != nil && !now.Before(g.expires) {
		delete(m.locks, key)
		g = nil
	}
	return g
}

// wake wakes every waiter. m.mu held.
func (m *Memory) wake() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// Obtain takes the lock on key for ttl; see lease.Locker. A context without
// deadline is not bounded: waiting lasts as long as the retry strategy
// allows.
func (m *Memory) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...lease.Option) (lease.Lock, error) {
	o, err := lease.Apply(opts)
	if err != nil {
		return nil, err
	}
	if err := backend.CheckKey(key); err != nil {
		return nil, err
	}
	if err := backend.CheckTTL(ttl, m.drift); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, lease.Join(lease.ErrNotObtained, err)
		}
		l, left, changed := m.try(key, ttl, o.Holder)
		if l != nil {
			return l, nil
		}
		if o.Retry == nil {
			return nil, lease.ErrNotObtained
		}
		wait, ok := o.Retry.Backoff(attempt)
		if !ok {
			return nil, lease.ErrNotObtained
		}
		// Wait for a release, the holder's expiry, the backoff or ctx.
		fire := make(chan struct{})
		t := m.clock.AfterFunc(min(wait, left), func() { close(fire) })
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, lease.Join(lease.ErrNotObtained, ctx.Err())
		case <-changed:
		case <-fire:
		}
		t.Stop()
	}
}

// try makes one attempt: the grant, or the holder's remaining lease and a
// channel closed at the next release.
func (m *Memory) try(key string, ttl time.Duration, holder string) (l *memLock, left time.Duration, changed <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	if g := m.held(key, now); g != nil {
		return nil, g.expires.Sub(now), m.changed
	}
	m.fences[key]++
	g := &grant{token: rand.Text(), fence: m.fences[key], holder: holder, expires: now.Add(ttl.Truncate(time.Millisecond))}
	m.locks[key] = g
	l = &memLock{m: m, key: key, token: g.token, fence: g.fence, until: backend.ValidUntil(now, ttl, m.drift)}
	return l, 0, nil
}

// Inspect reports who holds key.
func (m *Memory) Inspect(_ context.Context, key string) (lease.Info, error) {
	if err := backend.CheckKey(key); err != nil {
		return lease.Info{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	g := m.held(key, now)
	if g == nil {
		return lease.Info{Key: key}, nil
	}
	return lease.Info{Key: key, Held: true, Holder: g.holder, Fence: g.fence, TTL: g.expires.Sub(now)}, nil
}

// Break deletes the lock on key behind its holder's back, as an operator or
// an evicting Redis would: its next renewal finds it gone.
func (m *Memory) Break(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.locks, key)
	m.wake()
}

// Put writes a fenced record; see lease.Store.
func (m *Memory) Put(_ context.Context, key string, value []byte, fence int64, ttl time.Duration) error {
	if err := checkRecord(key, fence, ttl); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	if s := m.record(key, now); s != nil && s.rec.Fence > fence {
		return fmt.Errorf("%w: fence %d is below %d", lease.ErrStaleFence, fence, s.rec.Fence)
	}
	s := &stored{rec: lease.Record{Value: slices.Clone(value), Fence: fence}}
	if ttl > 0 {
		s.expires = now.Add(ttl)
	}
	m.records[key] = s
	return nil
}

// Get reads a record; see lease.Store.
func (m *Memory) Get(_ context.Context, key string) (lease.Record, error) {
	if err := backend.CheckKey(key); err != nil {
		return lease.Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	s := m.record(key, now)
	if s == nil {
		return lease.Record{}, lease.ErrNotFound
	}
	r := s.rec
	r.Value = slices.Clone(r.Value)
	if !s.expires.IsZero() {
		r.TTL = s.expires.Sub(now)
	}
	return r, nil
}

// Delete removes a record; see lease.Store.
func (m *Memory) Delete(_ context.Context, key string, fence int64) error {
	if err := checkRecord(key, fence, 0); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.record(key, m.clock.Now()); s != nil {
		if s.rec.Fence > fence {
			return fmt.Errorf("%w: fence %d is below %d", lease.ErrStaleFence, fence, s.rec.Fence)
		}
		delete(m.records, key)
	}
	return nil
}

// record returns the live record at key; an expired one is dropped. m.mu
// held.
func (m *Memory) record(key string, now time.Time) *stored {
	s := m.records[key]
	if s != nil && !s.expires.IsZero() && !now.Before(s.expires) {
		delete(m.records, key)
		s = nil
	}
	return s
}

func checkRecord(key string, fence int64, ttl time.Duration) error {
	if err := backend.CheckKey(key); err != nil {
		return err
	}
	if fence <= 0 {
		return lease.Invalid("fence %d must be positive", fence)
	}
	if ttl < 0 || ttl > 0 && ttl < time.Millisecond {
		return lease.Invalid("record TTL %v must be 0 or at least 1ms", ttl)
	}
	return nil
}

// memLock is a grant of a Memory.
type memLock struct {
	m     *Memory
	key   string
	token string
	fence int64

	mu    sync.Mutex
	until time.Time // guarded by mu
	watch backend.ReleaseWatch
}

func (l *memLock) Key() string   { return l.key }
func (l *memLock) Token() string { return l.token }
func (l *memLock) Fence() int64  { return l.fence }

func (l *memLock) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

func (l *memLock) setUntil(t time.Time) {
	l.mu.Lock()
	l.until = t
	l.mu.Unlock()
}

// mine returns l's grant if it still holds the lock. m.mu held.
func (l *memLock) mine(now time.Time) *grant {
	if g := l.m.held(l.key, now); g != nil && g.token == l.token {
		return g
	}
	return nil
}

func (l *memLock) Refresh(_ context.Context, ttl time.Duration) error {
	if err := backend.CheckTTL(ttl, l.m.drift); err != nil {
		return err
	}
	m := l.m
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	g := l.mine(now)
	if g == nil {
		l.setUntil(time.Time{})
		return lease.ErrNotHeld
	}
	g.expires = now.Add(ttl.Truncate(time.Millisecond))
	l.setUntil(backend.ValidUntil(now, ttl, m.drift))
	return nil
}

func (l *memLock) Release(context.Context) error {
	l.watch.Released() // ends Hold and Run (see lease.Keeper)
	m := l.m
	m.mu.Lock()
	defer m.mu.Unlock()
	l.setUntil(time.Time{})
	if l.mine(m.clock.Now()) == nil {
		return lease.ErrNotHeld
	}
	delete(m.locks, l.key)
	m.wake()
	return nil
}

// Keep renews l on the Memory's clock, for Hold and Run (lease.Keeper).
func (l *memLock) Keep(ttl, interval time.Duration, lost func(error)) (stop func()) {
	return l.watch.Keep(lost, func(lost func(error)) func() {
		return lease.Refresher{Clock: l.m.clock, Lock: l}.Keep(ttl, interval, lost)
	})
}

// Now is the time on the Memory's clock, that of the Lock's ValidUntil.
func (l *memLock) Now() time.Time { return l.m.clock.Now() }
