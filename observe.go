package redislock

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// An Observer receives a Client's events: any value that implements one or
// more of ObtainObserver, WaitObserver, RefreshObserver, ReleaseObserver,
// LossObserver, NodeObserver, SubscriptionObserver, CleanupObserver and
// StaleFenceObserver. Give it to New or NewQuorum with WithObserver; the
// metric and trace adapters (extra/redislockprom, extra/redislockotel) are
// Observers.
//
// Methods are called synchronously, on the goroutine where the event
// happens, so they must be quick and must not call the Client. The Start
// methods return the context the operation goes on with (a span's, say),
// which the matching Done method gets. No event carries a lock's token.
// A Client without observers pays nothing for them.
type Observer interface{}

// ObtainObserver is told about Obtain and ObtainMulti calls.
type ObtainObserver interface {
	ObtainStart(ctx context.Context, e ObtainStartEvent) context.Context
	ObtainDone(ctx context.Context, e ObtainDoneEvent)
}

// ObtainStartEvent begins an Obtain call (ObtainMulti: the keys joined by
// ",").
type ObtainStartEvent struct {
	Key string
	TTL time.Duration
}

// ObtainDoneEvent ends an Obtain call.
type ObtainDoneEvent struct {
	Key      string
	TTL      time.Duration
	Fence    int64         // the grant's fence; 0 when not obtained
	Attempts int           // attempts counted by the retry strategy
	Wait     time.Duration // from the call to its return
	Err      error         // nil: obtained; see Outcome
}

// Outcome is how an Obtain call ended, for metrics.
type Outcome string

// The outcomes of Obtain.
const (
	Obtained  Outcome = "obtained"  // a grant was returned
	Contended Outcome = "contended" // held by another until the wait ended (ErrNotObtained)
	Failed    Outcome = "error"     // Redis unreachable, an error reply, no quorum, bad input
)

// Outcome classifies the event's Err.
func (e ObtainDoneEvent) Outcome() Outcome {
	switch {
	case e.Err == nil:
		return Obtained
	case errors.Is(e.Err, ErrNotObtained):
		return Contended
	}
	return Failed
}

// WaitObserver is told when an Obtain call, its first attempt having found
// the lock held, starts to wait: contention.
type WaitObserver interface {
	WaitStart(ctx context.Context, e WaitEvent)
}

// WaitEvent is an Obtain call beginning to wait for a held lock.
type WaitEvent struct {
	Key string
	// Waiters is how many callers of this Client wait for the key, this one
	// included; -1 when the Client does not keep count (polling, sharded).
	Waiters int
}

// RefreshObserver is told about Refresh calls, including the renewals of
// Run and lease.Hold (Renewal).
type RefreshObserver interface {
	RefreshStart(ctx context.Context, e RefreshStartEvent) context.Context
	RefreshDone(ctx context.Context, e RefreshDoneEvent)
}

// RefreshStartEvent begins a Refresh.
type RefreshStartEvent struct {
	Key     string
	Fence   int64
	TTL     time.Duration
	Renewal bool // by Run or lease.Hold
}

// RefreshDoneEvent ends a Refresh. An Err matching ErrNotHeld means the
// grant was found gone (expired, or taken by another: a stale owner); other
// errors are failed renewals.
type RefreshDoneEvent struct {
	Key     string
	Fence   int64
	TTL     time.Duration
	Renewal bool
	Err     error
}

// ReleaseObserver is told about Release calls.
type ReleaseObserver interface {
	ReleaseStart(ctx context.Context, e ReleaseStartEvent) context.Context
	ReleaseDone(ctx context.Context, e ReleaseDoneEvent)
}

// ReleaseStartEvent begins a Release.
type ReleaseStartEvent struct {
	Key   string
	Fence int64
}

// ReleaseDoneEvent ends a Release. An Err matching ErrNotHeld means the
// grant was already gone: it expired without release, or a newer holder
// has the lock.
type ReleaseDoneEvent struct {
	Key   string
	Fence int64
	Held  time.Duration // from the grant's request to the release
	Err   error
}

// LossObserver is told when Run or lease.Hold find a lock lost while work
// ran under it.
type LossObserver interface {
	LockLost(ctx context.Context, e LossEvent)
}

// LossEvent is a held lock lost: Cause matches ErrNotHeld (found gone) or
// ErrLeaseExpired (no renewal got through before its validity ended).
type LossEvent struct {
	Key   string
	Fence int64
	Held  time.Duration
	Cause error
}

// NodeObserver is told about every failed call to a Redis node (in quorum
// mode, the node's availability).
type NodeObserver interface {
	NodeFailed(ctx context.Context, e NodeEvent)
}

// NodeEvent is one failed node call: Node is the node's index (0 in single
// mode), Op the operation ("obtain", "refresh", "release", "ttl",
// "inspect", "record", ...), Err a *NodeError.
type NodeEvent struct {
	Node int
	Op   string
	Err  error
}

// SubscriptionObserver is told when the subscription connection of
// notified waiting failed and is being replaced (waiters fall back to their
// backoff meanwhile).
type SubscriptionObserver interface {
	Resubscribed(e SubscriptionEvent)
}

// SubscriptionEvent is a replaced subscription connection and why.
type SubscriptionEvent struct {
	Err error
}

// CleanupObserver is told when a background clean-up (the release of a
// grant whose outcome was unknown, of a late or partial quorum grant, of a
// handoff nobody took) failed or could not run: that grant may stay on
// Redis until its TTL.
type CleanupObserver interface {
	CleanupFailed(ctx context.Context, e CleanupEvent)
}

// CleanupEvent is one failed clean-up.
type CleanupEvent struct {
	Key  string
	Node int
	Err  error
}

// StaleFenceObserver is told when the Client's Store refuses a write or a
// delete with a fence below the record's: a stale owner.
type StaleFenceObserver interface {
	StaleFence(ctx context.Context, e StaleFenceEvent)
}

// StaleFenceEvent is a refused write: Fence is the writer's, Newest the
// record's.
type StaleFenceEvent struct {
	Key    string
	Fence  int64
	Newest int64
}

// WithObserver adds o to the Client's observers (the option may be given
// more than once: each observer gets every event it implements a method
// for). A value that implements none of the observer interfaces is an
// invalid option.
func WithObserver(o Observer) ClientOption {
	return clientOptionFunc(func(c *config) {
		if !anObserver(o) {
			c.defaults.fail(invalid("%T implements none of the observer interfaces", o))
			return
		}
		c.observers = append(c.observers, o)
	})
}

// WithLogger logs the Client's events to l: grants and releases at Debug;
// losses, failed renewals and failed clean-ups at Warn; node failures and
// replaced subscriptions at Info; always with the key, the fence and, where
// it applies, the hold time or wait, never the token. Default: no logging.
func WithLogger(l *slog.Logger) ClientOption {
	return clientOptionFunc(func(c *config) {
		if l == nil {
			c.defaults.fail(invalid("nil logger"))
			return
		}
		c.logger = l
	})
}

func anObserver(o Observer) bool {
	switch o.(type) {
	case ObtainObserver, WaitObserver, RefreshObserver, ReleaseObserver, LossObserver,
		NodeObserver, SubscriptionObserver, CleanupObserver, StaleFenceObserver:
		return true
	}
	return false
}
