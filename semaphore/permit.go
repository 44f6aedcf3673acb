package semaphore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
)

// Permit is one slot of a semaphore, held on a lease: its own token,
// fence and renewal. It implements lease.Lock, so that lease.Hold and
// lease.RunLock renew it. Its methods are safe for concurrent use, and a
// nil *Permit answers lease.ErrNotHeld.
//
// Fences are strictly increasing across all permits of a semaphore. With
// N holders at once, a resource guarded by a semaphore checks fences per
// slot: keep the newest fence accepted for each slot and refuse a write
// whose fence is below the one of its slot (for example with
// redislock.FencedSet on a key per slot). A holder whose lease ended and
// whose slot was given to another can then no longer write.
type Permit struct {
	s     *Semaphore
	token string
	slot  int
	fence int64
	start time.Time // the start of the request that granted it

	mu    sync.Mutex
	until time.Time // guarded by mu
}

var _ lease.Lock = (*Permit)(nil)

// Key returns the semaphore's name.
func (p *Permit) Key() string {
	if p == nil {
		return ""
	}
	return p.s.name
}

// Token returns the permit's random token (from crypto/rand, 130 bits).
func (p *Permit) Token() string {
	if p == nil {
		return ""
	}
	return p.token
}

// Fence returns the permit's fencing token: greater than that of every
// earlier permit of the semaphore. Zero for a nil Permit.
func (p *Permit) Fence() int64 {
	if p == nil {
		return 0
	}
	return p.fence
}

// Slot returns the slot the permit holds, in [0, limit): the smallest that
// was free when it was granted. Fence checks go per slot (see Permit).
func (p *Permit) Slot() int {
	if p == nil {
		return -1
	}
	return p.slot
}

// ValidUntil returns the end of the validity last confirmed: the start of
// the request that confirmed it plus its TTL, less drift (TTL * drift
// factor + 2 ms), on the monotonic clock; the zero Time once the permit is
// known not to be held.
func (p *Permit) ValidUntil() time.Time {
	if p == nil {
		return time.Time{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.until
}

func (p *Permit) setUntil(t time.Time) {
	p.mu.Lock()
	p.until = t
	p.mu.Unlock()
}

// Refresh extends the permit's lease to ttl from now, only while it is
// held on the server's clock; lease.ErrNotHeld once its lease ended or it
// was released (even if no one took its slot yet). A Redis error leaves
// ValidUntil as it was. A refresh confirmed after the validity it asked
// for returns lease.ErrGrantExpired.
func (p *Permit) Refresh(ctx context.Context, ttl time.Duration) (err error) {
	if p == nil {
		return lease.ErrNotHeld
	}
	if err := backend.CheckTTL(ttl, p.s.o.drift); err != nil {
		return err
	}
	start := time.Now()
	if obs := p.s.obs; obs != nil {
		defer func() { obs.refreshed(ctx, p, ttl, err) }()
	}
	held, err := script.SemRefresh(ctx, p.s.rdb, p.s.keys, p.token, ttl.Milliseconds(), p.s.wake)
	switch {
	case err != nil:
		return fmt.Errorf("redislock: semaphore %q: refresh: %w", p.s.name, err)
	case !held:
		p.setUntil(time.Time{})
		return lease.ErrNotHeld
	}
	until := backend.ValidUntil(start, ttl, p.s.o.drift)
	if now := time.Now(); !now.Before(until) {
		return backend.Expired(start, now, ttl, p.s.o.drift)
	}
	p.setUntil(until)
	return nil
}

// Release gives the slot back and wakes the waiter at the head of the
// queue; lease.ErrNotHeld if the permit was no longer held. It runs on a
// context detached from ctx's cancellation, bounded by the release timeout
// (WithReleaseTimeout), so that `defer p.Release(ctx)` cleans up after ctx
// was cancelled.
func (p *Permit) Release(ctx context.Context) (err error) {
	if p == nil {
		return lease.ErrNotHeld
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.s.o.releaseTimeout)
	defer cancel()
	if obs := p.s.obs; obs != nil {
		defer func() { obs.released(ctx, p, err) }()
	}
	p.setUntil(time.Time{})
	held, err := script.SemRelease(ctx, p.s.rdb, p.s.keys, p.token, p.s.wake)
	switch {
	case err != nil:
		return fmt.Errorf("redislock: semaphore %q: release: %w", p.s.name, err)
	case !held:
		return lease.ErrNotHeld
	}
	return nil
}

// TTL returns the permit's remaining lease on the Redis server, or
// lease.ErrNotHeld.
func (p *Permit) TTL(ctx context.Context) (time.Duration, error) {
	if p == nil {
		return 0, lease.ErrNotHeld
	}
	n, held, err := script.SemTTL(ctx, p.s.rdb, p.s.keys, p.token)
	switch {
	case err != nil:
		return 0, fmt.Errorf("redislock: semaphore %q: ttl: %w", p.s.name, err)
	case !held:
		p.setUntil(time.Time{})
		return 0, lease.ErrNotHeld
	}
	return ms(n), nil
}
