package redislock

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease/backend"
	"github.com/redislock-go/redislock/observe"
)

// Lock is one grant of a lock. Its methods are safe for concurrent use, and
// a nil *Lock answers ErrNotHeld.
type Lock struct {
	c     *Client
	key   string
	keys  keys.Lock
	token string
	arg   any // token, boxed once for the script calls
	// ttlArg is the TTL in ms of the request that granted it, boxed once
	// for the script calls.
	ttlArg any
	fence  int64
	opts   options
	start  time.Time // the request that granted it began: hold times

	validity
	grant    *grantNodes // quorum: the nodes the grant reached (quorum_grant.go)
	handoffs int         // how many handoffs in a row led to this grant (handoff.go)
	kept     *kept       // guarded by mu: the Client's renewer renews it (renew.go)
	attempt  attempt     // the obtain call that made it (single.go)
	// watch, guarded by mu, ends Run's and Hold's renewal on Release (renew.go)
	watch *backend.ReleaseWatch
}

// validity is what a grant last confirmed, safe for concurrent use (shared
// by Lock and MultiLock). One rule: once the grant is known not to be held
// (gone: released, or found lost), until stays zero; a later confirmation
// (a Refresh or renewal that raced the Release) changes nothing.
type validity struct {
	mu       sync.Mutex
	ttl      time.Duration // guarded by mu: last TTL asked for
	until    time.Time     // guarded by mu: validity confirmed by the last grant or refresh
	gone     bool          // guarded by mu: known not to be held
	released bool          // guarded by mu: a Release succeeded; a second one is ErrNotHeld
}

func (s *validity) validUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.until
}

// confirmFrom records the validity of a lease of ttl asked for at start, or
// returns ErrGrantExpired when that validity has already passed (a grant
// or refresh is never confirmed late), or ErrNotHeld when the grant is
// gone.
func (s *validity) confirmFrom(o *options, start time.Time, ttl time.Duration) error {
	until := o.validUntil(start, ttl)
	if now := time.Now(); !now.Before(until) {
		return backend.Expired(start, now, ttl, o.driftFactor)
	}
	if !s.set(until, ttl) {
		return ErrNotHeld
	}
	return nil
}

// set records a confirmed validity, unless the grant is gone (false).
func (s *validity) set(until time.Time, ttl time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.gone {
		s.until, s.ttl = until, ttl
	}
	return !s.gone
}

// lost records that the grant is known not to be held.
func (s *validity) lost() {
	s.mu.Lock()
	s.until, s.gone = time.Time{}, true
	s.mu.Unlock()
}

// releasing reports whether a Release succeeded already.
func (s *validity) releasing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released
}

// endRelease records a release's outcome (nil for one left to the
// background: the grant is done with): no validity, gone unless the
// outcome is unknown. It reports whether a Release had succeeded before.
func (s *validity) endRelease(err error) (already bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	already = s.released
	s.until, s.released = time.Time{}, s.released || err == nil
	s.gone = s.gone || err == nil || errors.Is(err, ErrNotHeld)
	return already
}

func (s *validity) currentTTL() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ttl
}

// Key returns the key the caller asked for (without prefix or hash tag).
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Token returns the grant's random ownership token (128 bits from
// crypto/rand, base32): unique per grant, never reused.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Fence returns the grant's fencing token: greater than the fence of every
// earlier grant of this key, by any client. Pass it to the protected
// resource and have it reject writes with a fence below the highest it has
// seen (FencedSet does that on Redis). Zero for a nil Lock. How fences are
// minted, and what they assume: see the package guide (Fences).
func (l *Lock) Fence() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// ValidUntil returns the end of the validity last confirmed by Redis: the
// start of the Obtain or Refresh request that confirmed it, plus its TTL,
// less drift (TTL * drift factor + 2 ms). It carries Go's monotonic clock
// reading, so time.Until(l.ValidUntil()) is immune to wall-clock steps. The
// zero Time once the lock is known not to be held (released, or a
// Refresh/TTL answered ErrNotHeld), for good: a Refresh or renewal that
// ran at the same time does not bring it back.
func (l *Lock) ValidUntil() time.Time {
	if l == nil {
		return time.Time{}
	}
	return l.validUntil()
}

// TTL returns the lock's remaining time to live on Redis (in quorum mode the
// least over the majority of nodes that answered first that they hold it),
// or ErrNotHeld when this grant is no longer held. This is Redis' view;
// ValidUntil is the conservative local one.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, ErrNotHeld
	}
	least, ok, errs := l.c.m.ttl(ctx, l)
	if err := l.c.verdict(ok, errs); err != nil {
		if errors.Is(err, ErrNotHeld) {
			l.lost()
		}
		return 0, err
	}
	return time.Duration(least) * time.Millisecond, nil
}

// Refresh extends the lease to ttl from now, only if this grant still holds
// the lock (on a majority in quorum mode), and moves ValidUntil forward.
// ErrNotHeld when the grant is gone (also when a Release of it ended
// first): a stale holder can never extend or shorten a newer holder's
// lock. A ttl below 1ms, or too short to leave validity after drift, is
// an error matching ErrInvalidArgument. If Redis cannot be reached,
// ValidUntil stays as it was and a later Refresh may still succeed. A
// refresh confirmed only after the validity it asked for has passed is
// ErrGrantExpired: the lock is then released and no longer held.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	return l.refresh(ctx, ttl, false)
}

// refresh is Refresh; renewal tells whether Run or Hold renews (for the
// observers).
func (l *Lock) refresh(ctx context.Context, ttl time.Duration, renewal bool) (err error) {
	if l == nil {
		return ErrNotHeld
	}
	if err := l.opts.checkTTL(ttl); err != nil {
		return err
	}
	if obs := l.c.obs; obs != nil {
		ctx = obs.refreshStart(ctx, observe.RefreshStartEvent{Key: l.key, Fence: l.fence, TTL: ttl, Renewal: renewal})
		defer func() {
			obs.refreshDone(ctx, observe.RefreshDoneEvent{Key: l.key, Fence: l.fence, TTL: ttl, Renewal: renewal, Err: err})
		}()
	}
	start := time.Now()
	m := l.c.m
	if err := l.c.verdict(m.refresh(ctx, l, ttl)); err != nil {
		if errors.Is(err, ErrNotHeld) {
			l.lost()
			m.lost(ctx, l, false) // undo a quorum minority's extensions
		}
		return err
	}
	if err := l.confirmFrom(&l.opts, start, ttl); err != nil {
		// Confirmed too late: the lease it asked for, and the one before
		// (which ended no later), may both have passed. Give it back. Or
		// released, or found lost, meanwhile (ErrNotHeld).
		l.lost()
		m.lost(ctx, l, !errors.Is(err, ErrNotHeld))
		return err
	}
	if k := l.keptEntry(); k != nil && !renewal {
		k.h.Confirmed(l.validUntil()) // the renewer's next renewal moves
	}
	return nil
}

// Release gives the lock back, only if this grant still holds it; ErrNotHeld
// otherwise: a stale holder never deletes a newer holder's lock.
//
// It runs on ctx without its cancellation and deadline (keeping its values),
// bounded by the release timeout (default 3 s), so that `defer
// l.Release(ctx)` cleans up after ctx was cancelled.
//
// While other callers of the same Client wait for the key (single mode,
// notified, not fair), Release hands the lock to the longest-waiting one in
// the same call instead (see the package guide, Handoff). In quorum mode it
// asks every node that holds the grant or may, and returns as soon as a
// majority released (or too few held the grant for a majority); the other
// nodes finish in the background (Close waits for them), and a node whose
// grant had not answered yet is released once it does.
func (l *Lock) Release(ctx context.Context) (err error) {
	if l == nil || l.releasing() {
		return ErrNotHeld
	}
	ctx, done := l.beginRelease(ctx)
	defer func() { done(err) }()
	c := l.c
	var handed bool
	if s := c.single; s != nil {
		handed, err = s.handOff(ctx, l)
	}
	if !handed {
		if err = c.verdict(c.m.release(ctx, l)); err == nil {
			l.c.wakeLocal(l)
		}
	}
	l.endRelease(err)
	return err
}

// beginRelease starts a release of l: it ends l's renewal (and the work
// that Run or a Held keeps under it), detaches ctx from the caller's
// cancellation and tells the observers; done reports the release's
// outcome to them (a no-op without observers).
func (l *Lock) beginRelease(ctx context.Context) (_ context.Context, done func(error)) {
	l.mu.Lock()
	k, w := l.kept, l.watch
	l.mu.Unlock()
	if k != nil {
		k.remove() // no renewal after the release
	}
	if w != nil {
		w.Released() // Run's fn, a Held: the lock is given up
	}
	ctx = detach(ctx)
	obs := l.c.obs
	if obs == nil {
		return ctx, noObserver
	}
	ctx = obs.releaseStart(ctx, observe.ReleaseStartEvent{Key: l.key, Fence: l.fence})
	return ctx, func(err error) {
		obs.releaseDone(ctx, observe.ReleaseDoneEvent{Key: l.key, Fence: l.fence, Held: time.Since(l.start), Err: err})
	}
}

// noObserver is beginRelease's done without observers.
func noObserver(error) {}

// releaseCall is one release of l on one node as a node call (nodes.Op),
// with its outcome: release.lua, after which the key is a released record
// (see recordTTL). A late one needs nothing more: a release that reached
// Redis late has released.
type releaseCall struct {
	l        *Lock
	released bool
}

func (r *releaseCall) Run(ctx context.Context, rdb redis.Scripter) (err error) {
	l := r.l
	ks := l.keys.Boxed[:1]
	if l.opts.fair {
		ks = script.Box(l.keys.FairRelease()...)
	}
	r.released, err = script.Release(ctx, rdb, ks, l.arg, recordTTL(l.currentTTL(), l.opts.releaseTimeout, l.ttlArg), l.c.publish(&l.opts), l.opts.fair)
	return err
}

func (*releaseCall) OnLate(context.Context, error) {}

// recordTTL is how long a released lock's key stays, as a released record
// (scripts/release.lua) that keeps the lock's last fence and the names of
// its latest releases: the lock's TTL, at least the release timeout, in ms
// for a script. At least the release timeout, because go-redis re-sends a
// release whose reply was lost only within the release call, which the
// release timeout bounds: the record answers every such re-send. At least
// the TTL, because then a released lock never leaves more than a crashed
// holder's would, and quorum nodes order the fences of grants up to a TTL
// apart without the clients' clocks. ttlArg is the lock's TTL in ms as
// first granted, boxed, reused when it is the answer.
func recordTTL(ttl, releaseTimeout time.Duration, ttlArg any) any {
	d := max(ttl, releaseTimeout)
	switch ms := d.Milliseconds(); {
	case d == DefaultReleaseTimeout:
		return defaultReleaseTimeoutMS
	case ttlArg == any(ms):
		return ttlArg
	default:
		return ms
	}
}

// defaultReleaseTimeoutMS is DefaultReleaseTimeout in ms, boxed once.
var defaultReleaseTimeoutMS any = DefaultReleaseTimeout.Milliseconds()

func (r *request) newLock() *Lock {
	token := rand.Text()
	return &Lock{c: r.c, key: r.key, keys: r.keys, token: token, arg: token, ttlArg: r.ttlArg, opts: r.opts}
}
