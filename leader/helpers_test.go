package leader_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/leasetest"
)

// errCut is what a cut link answers.
var errCut = errors.New("link cut")

// link is one candidate's way to a shared leasetest.Memory, which the test
// can cut (every call fails, as over a partitioned network) and restore.
// Its locks renew on the Memory's fake clock.
type link struct {
	m     *leasetest.Memory
	clock *leasetest.FakeClock
	cut   atomic.Bool
	last  atomic.Pointer[linkLock] // the last lock obtained
}

// lastLock returns the last lock obtained through n.
func (n *link) lastLock() *linkLock { return n.last.Load() }

var _ lease.Locker = (*link)(nil)

func (n *link) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...lease.Option) (lease.Lock, error) {
	if n.cut.Load() {
		return nil, errCut
	}
	l, err := n.m.Obtain(ctx, key, ttl, opts...)
	if err != nil {
		return nil, err
	}
	ll := &linkLock{Lock: l, n: n, okAt: grantedAt(l, ttl)}
	n.last.Store(ll)
	return ll, nil
}

func (n *link) Inspect(ctx context.Context, key string) (lease.Info, error) {
	if n.cut.Load() {
		return lease.Info{}, errCut
	}
	return n.m.Inspect(ctx, key)
}

// linkLock is a lock obtained through a link.
type linkLock struct {
	lease.Lock
	n *link

	mu   sync.Mutex
	okAt time.Time // guarded by mu: the last grant or renewal that got through
}

var _ lease.Keeper = (*linkLock)(nil)

func (l *linkLock) Refresh(ctx context.Context, ttl time.Duration) error {
	if l.n.cut.Load() {
		return errCut
	}
	err := l.Lock.Refresh(ctx, ttl)
	if err == nil {
		l.mu.Lock()
		l.okAt = grantedAt(l.Lock, ttl)
		l.mu.Unlock()
	}
	return err
}

// grantedAt is when the Memory granted or renewed l for ttl, from the
// validity it gave: ttl less drift after that.
func grantedAt(l lease.Lock, ttl time.Duration) time.Time {
	return l.ValidUntil().Add(-(ttl.Truncate(time.Millisecond) - lease.Drift(ttl, lease.DefaultDriftFactor)))
}

func (l *linkLock) Release(ctx context.Context) error {
	if l.n.cut.Load() {
		return errCut
	}
	return l.Lock.Release(ctx)
}

// Keep renews l on the link's clock.
func (l *linkLock) Keep(ttl, interval time.Duration, lost func(error)) func() {
	return lease.Refresher{Clock: l.n.clock, Lock: l}.Keep(ttl, interval, lost)
}

// lastOK is when the last grant or renewal of l got through.
func (l *linkLock) lastOK() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.okAt
}

// sink is the fenced resource the leaders write to, and the judge of their
// terms: a write is refused when a higher term wrote before it (the fence
// check), and a write made while the writer's term claimed to be valid
// (now < Term.ValidUntil) after a higher term had written is an overlap of
// two leaders' validity windows, which must never happen.
type sink struct {
	now func() time.Time

	mu       sync.Mutex
	newest   int64 // guarded by mu: the highest term written
	writes   int   // guarded by mu: writes accepted
	refused  int   // guarded by mu: writes refused by the fence
	overlaps []string
}

// write is a write by the leader of term fence, whose term claimed to be
// valid until validUntil when it was sent.
func (s *sink) write(fence int64, validUntil time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if fence < s.newest {
		s.refused++
		if now.Before(validUntil) {
			s.overlaps = append(s.overlaps, fmt.Sprintf("term %d wrote %v before its claimed validity ended, after term %d had written",
				fence, validUntil.Sub(now), s.newest))
		}
		return fmt.Errorf("%w: term %d below %d", lease.ErrStaleFence, fence, s.newest)
	}
	s.newest = fence
	s.writes++
	return nil
}

// writeAs writes as the leader of t, if t still claims to lead.
func (s *sink) writeAs(t interface {
	Fence() int64
	ValidUntil() time.Time
}) error {
	vu := t.ValidUntil()
	if vu.IsZero() {
		return errors.New("term over")
	}
	return s.write(t.Fence(), vu)
}

func (s *sink) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.overlaps {
		t.Error(o)
	}
	t.Logf("sink: %d writes accepted, %d refused by the fence, %d overlaps", s.writes, s.refused, len(s.overlaps))
}

// ctxFor is a context that bounds a test, as a failure bound only.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recv receives from ch, failing t if ctx ends first.
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

func wantIs(t *testing.T, what string, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("%s: got %v, want an error matching %v", what, err, target)
		}
	}
}
