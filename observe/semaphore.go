package observe

import (
	"context"
	"time"
)

// The events of package semaphore: Acquire calls (and their wait in the
// queue), then each permit's renewals and release. Together they give the
// permits a process holds and the calls that wait for one.

// AcquireObserver is told about a semaphore's Acquire and TryAcquire calls.
type AcquireObserver interface {
	AcquireStart(ctx context.Context, e AcquireStartEvent) context.Context
	AcquireDone(ctx context.Context, e AcquireDoneEvent)
}

// AcquireStartEvent begins an Acquire or TryAcquire call.
type AcquireStartEvent struct {
	Semaphore string // its name
	TTL       time.Duration
}

// AcquireDoneEvent ends an Acquire or TryAcquire call.
type AcquireDoneEvent struct {
	Semaphore string
	TTL       time.Duration
	Slot      int           // the permit's slot; -1 when not acquired
	Fence     int64         // the permit's fence; 0 when not acquired
	Wait      time.Duration // from the call to its return
	Err       error         // nil: acquired; see Outcome
}

// Outcome classifies the event's Err as for Obtain: Contended when every
// slot stayed taken until the wait ended.
func (e AcquireDoneEvent) Outcome() Outcome { return outcome(e.Err) }

// QueueObserver is told when an Acquire call, its first attempt having
// found every slot taken (or earlier waiters queued), starts to wait in the
// semaphore's queue. Its AcquireDone follows.
type QueueObserver interface {
	Queued(ctx context.Context, e QueueEvent)
}

// QueueEvent is an Acquire call beginning to wait.
type QueueEvent struct {
	Semaphore string
	Rank      int64 // its place in the queue (0: next)
}

// PermitObserver is told about the renewals and the release of permits.
type PermitObserver interface {
	PermitRefreshed(ctx context.Context, e PermitEvent)
	PermitReleased(ctx context.Context, e PermitEvent)
}

// PermitEvent is one Refresh or Release of a permit. An Err matching
// lease.ErrNotHeld means the permit's lease had ended (or it was released
// before): the permit is gone.
type PermitEvent struct {
	Semaphore string
	Slot      int
	Fence     int64
	TTL       time.Duration // Refresh: the lease asked for
	Held      time.Duration // from the permit's request to this call
	Err       error
}
