// Package track is the bookkeeping shared by the metric adapters
// (extra/redislockprom, extra/redislockotel): the grants a Client holds,
// the per-call state an Obtain or Refresh carries in its context, and the
// label values the adapters derive from events. It has no dependency beyond
// the root package.
package track

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// grant names one grant: a key and its fence (fences are unique per key).
type grant struct {
	key   string
	fence int64
}

type entry struct {
	deadline time.Time // end of the lease, as last confirmed
	lost     bool      // Run or Hold lost it; its Release is still to come
}

// Grants tracks the grants a Client holds: obtained, and neither released
// nor past their lease. Each grant leaves the set once, either released
// (Release returned nil) or ended without release: its lease ran out (found
// by a sweep), a Refresh or Release found it gone, or Run or Hold lost it.
// Such an end is reported once to the expired callback. Its methods are safe
// for concurrent use; the callback runs under its lock and must be quick.
//
// A grant with fence 0 is not tracked: ObtainMulti reports no fence, and a
// MultiLock's Refresh and Release send no events.
type Grants struct {
	now     func() time.Time
	expired func(key string)

	mu      sync.Mutex
	entries map[grant]entry
	swept   int // len(entries) after the last sweep
}

// NewGrants returns an empty set. now is the clock (nil: time.Now);
// expired (nil: none) is told about every grant that ended without release.
func NewGrants(now func() time.Time, expired func(key string)) *Grants {
	if now == nil {
		now = time.Now
	}
	if expired == nil {
		expired = func(string) {}
	}
	return &Grants{now: now, expired: expired, entries: make(map[grant]entry)}
}

// Obtained adds a grant of key with fence whose lease ends after ttl. The
// set is swept when it has doubled since the last sweep, so that a program
// that never releases and is never scraped does not grow it without bound.
func (g *Grants) Obtained(key string, fence int64, ttl time.Duration) {
	if fence == 0 {
		return
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.entries[grant{key, fence}] = entry{deadline: now.Add(ttl)}
	if n := len(g.entries); n >= 64 && n >= 2*g.swept {
		g.sweepLocked(now)
	}
}

// Refreshed moves the lease end of a held grant to ttl from now.
func (g *Grants) Refreshed(key string, fence int64, ttl time.Duration) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	k := grant{key, fence}
	if e, ok := g.entries[k]; ok && !e.lost {
		g.entries[k] = entry{deadline: now.Add(ttl)}
	}
}

// Released removes a grant its holder released.
func (g *Grants) Released(key string, fence int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.entries, grant{key, fence})
}

// Gone removes a grant that a Refresh or Release found gone, and reports
// whether that was a stale owner's act: false when Run or Hold had already
// reported it lost (the Release after a loss is routine).
func (g *Grants) Gone(key string, fence int64) (stale bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := grant{key, fence}
	e, ok := g.entries[k]
	delete(g.entries, k)
	if ok && !e.lost {
		g.expired(key)
	}
	return !ok || !e.lost
}

// lostFor is how long the entry of a lost grant is kept for the Release
// that follows the loss.
const lostFor = time.Minute

// Lost marks a grant that Run or Hold lost (or whose renewal found it gone):
// no longer held, ended without release. Its entry stays until its Release
// (or lostFor), so that the Release after the loss is not taken for a stale
// owner's.
func (g *Grants) Lost(key string, fence int64) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	k := grant{key, fence}
	if e, ok := g.entries[k]; ok && !e.lost {
		g.entries[k] = entry{deadline: now.Add(lostFor), lost: true}
		g.expired(key)
	}
}

// Sweep removes the grants past their lease (reporting those not lost
// before as expired) and calls held, if not nil, for each grant still held.
// It returns how many are held.
func (g *Grants) Sweep(held func(key string)) int {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweepLocked(now)
	n := 0
	for k, e := range g.entries {
		if !e.lost {
			n++
			if held != nil {
				held(k.key)
			}
		}
	}
	return n
}

func (g *Grants) sweepLocked(now time.Time) {
	for k, e := range g.entries {
		if !now.Before(e.deadline) {
			delete(g.entries, k)
			if !e.lost {
				g.expired(k.key)
			}
		}
	}
	g.swept = len(g.entries)
}

// Call is the state of one Obtain or Refresh call, carried in the context
// the Start method returns: when it began and, for Obtain, when it began
// to wait. It is a context.Context itself (the caller's, with one value
// more), so a Start method allocates it and nothing else.
type Call struct {
	context.Context
	Start time.Time
	mu    sync.Mutex
	wait  time.Time // guarded by mu; zero: the call has not waited
	Data  any       // the adapter's own per-call value (a span, say)
	key   *Key
}

// Key finds the Calls of one adapter: two adapters on one Client, each with
// a Key of its own (NewKey), each find their own. A pointer, so that looking
// it up allocates nothing.
type Key struct{ _ byte }

// NewKey returns a new Key.
func NewKey() *Key { return new(Key) }

// Begin returns ctx with a new Call under key that began now; From finds
// it.
func (k *Key) Begin(ctx context.Context) *Call {
	return &Call{Context: ctx, Start: time.Now(), key: k}
}

// From returns the Call under key in ctx, or nil.
func (k *Key) From(ctx context.Context) *Call {
	c, _ := ctx.Value(k).(*Call)
	return c
}

// Value returns the Call for its own key, and otherwise ctx's values.
func (c *Call) Value(key any) any {
	if k, ok := key.(*Key); ok && k == c.key {
		return c
	}
	return c.Context.Value(key)
}

// Waited records that the call began to wait now, once; it reports false
// if it had already.
func (c *Call) Waited() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.wait.IsZero() {
		return false
	}
	c.wait = time.Now()
	return true
}

// WaitStart returns when the call began to wait, or the zero Time.
func (c *Call) WaitStart() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wait
}

// Label values, shared by both adapters.
const (
	KindRenewal = "renewal" // a Refresh by Run or lease.Hold
	KindCall    = "call"    // a Refresh called by the user

	ResultOK      = "ok"
	ResultNotHeld = "not_held" // the grant was found gone
	ResultError   = "error"    // Redis unreachable, an error reply, no quorum

	ReasonNotHeld      = "not_held"      // a renewal found the lock gone
	ReasonLeaseExpired = "lease_expired" // no renewal got through before the validity ended

	StaleRefresh = "refresh" // a Refresh found the grant gone
	StaleRelease = "release" // a Release found the grant gone
	StaleWrite   = "write"   // the Store refused a stale fence
)

// Label values of the pattern packages' metrics, shared by both adapters.
const (
	TermResigned = "resigned" // leader: the term ended by a resignation
	TermLost     = "lost"     // leader: the term's lock was lost

	FillCold    = "fill"    // stampede: the fill of a missing value
	FillRefresh = "refresh" // stampede: an early refresh
)

// TermReason is the reason label of a term's end.
func TermReason(lost bool) string {
	if lost {
		return TermLost
	}
	return TermResigned
}

// FillKind is the kind label of a fill.
func FillKind(refresh bool) string {
	if refresh {
		return FillRefresh
	}
	return FillCold
}

// FillResult is the result label of a fill: ok, or error.
func FillResult(err error) string {
	if err != nil {
		return ResultError
	}
	return ResultOK
}

// Kind is the kind label of a Refresh.
func Kind(renewal bool) string {
	if renewal {
		return KindRenewal
	}
	return KindCall
}

// Result is the result label of a Refresh or Release error.
func Result(err error) string {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, lease.ErrNotHeld):
		return ResultNotHeld
	}
	return ResultError
}

// Reason is the reason label of a loss.
func Reason(cause error) string {
	if errors.Is(cause, lease.ErrLeaseExpired) {
		return ReasonLeaseExpired
	}
	return ReasonNotHeld
}

// Default histogram buckets, in seconds, of both adapters.
var (
	// 25 µs to 10 s, three a decade: a call to a Redis on the same host
	// or network takes 50 µs to 0.5 ms.
	LatencyBuckets = []float64{.000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	WaitBuckets    = []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300} // 1 ms to 5 min
	HoldBuckets    = []float64{.01, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}       // 10 ms to 1 h
)

// Increasing reports whether b is a non-empty, strictly increasing list of
// bucket boundaries.
func Increasing(b []float64) bool {
	for i := 1; i < len(b); i++ {
		if !(b[i-1] < b[i]) {
			return false
		}
	}
	return len(b) > 0
}

// Invalid returns an error matching lease.ErrInvalidArgument with the
// formatted message: an adapter's invalid option.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", lease.ErrInvalidArgument, fmt.Sprintf(format, args...))
}
