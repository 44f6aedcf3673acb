package observe

import (
	"context"
	"errors"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// The events of one lock's life: obtained (after waiting, perhaps),
// renewed, released or lost.

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
	Contended Outcome = "contended" // held by another until the wait ended (lease.ErrNotObtained)
	Failed    Outcome = "error"     // the backend unreachable, an error reply, no quorum, bad input
)

// Outcome classifies the event's Err.
func (e ObtainDoneEvent) Outcome() Outcome { return outcome(e.Err) }

func outcome(err error) Outcome {
	switch {
	case err == nil:
		return Obtained
	case errors.Is(err, lease.ErrNotObtained):
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
	// Waiters is how many callers of this client wait for the key, this one
	// included; -1 when the client does not keep count (polling, sharded).
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

// RefreshDoneEvent ends a Refresh. An Err matching lease.ErrNotHeld means
// the grant was found gone (expired, or taken by another: a stale owner);
// other errors are failed renewals.
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

// ReleaseDoneEvent ends a Release. An Err matching lease.ErrNotHeld means
// the grant was already gone: it expired without release, or a newer
// holder has the lock.
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

// LossEvent is a held lock lost: Cause matches lease.ErrNotHeld (found
// gone) or lease.ErrLeaseExpired (no renewal got through before its
// validity ended).
type LossEvent struct {
	Key   string
	Fence int64
	Held  time.Duration
	Cause error
}
