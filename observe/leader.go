package observe

import (
	"context"
	"errors"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// The events of package leader: the terms a candidate wins and how they
// end.

// TermObserver is told about the terms of an Election: each won (an
// election), each ended (resigned or lost).
type TermObserver interface {
	TermStarted(ctx context.Context, e TermEvent)
	TermEnded(ctx context.Context, e TermEvent)
}

// TermEvent is a term that began or ended.
type TermEvent struct {
	Election string // the election's name
	Identity string // the leader's identity
	Term     int64  // the term's number: its lock's fence
	Held     time.Duration
	// Cause is why the term ended (TermEnded only): leader.ErrResigned, or
	// an error matching lease.ErrLockLost (see Lost).
	Cause error
}

// Lost reports whether the term ended by losing its lock rather than by a
// resignation.
func (e TermEvent) Lost() bool { return errors.Is(e.Cause, lease.ErrLockLost) }
