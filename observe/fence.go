package observe

import "context"

// StaleFenceObserver is told when a Store refuses a write or a delete with
// a fence below the record's: a stale owner.
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
