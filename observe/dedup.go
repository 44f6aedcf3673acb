package observe

import (
	"context"
	"time"
)

// The events of package dedup: how each Do of a job ended.

// JobObserver is told about the Do calls of a dedup Group.
type JobObserver interface {
	JobDone(ctx context.Context, e JobEvent)
}

// JobOutcome is how a Do call ended.
type JobOutcome string

// The outcomes of a dedup Do.
const (
	JobRan        JobOutcome = "ran"         // this call ran the job (Err: the job's or the record's error)
	JobDuplicate  JobOutcome = "duplicate"   // an earlier run's outcome was recorded: not run again
	JobInProgress JobOutcome = "in_progress" // another worker was running it (dedup.ErrInProgress)
	JobFailed     JobOutcome = "error"       // the backend unreachable, or ctx ended while waiting
)

// JobEvent ends a Do call.
type JobEvent struct {
	ID       string // the job's id
	Outcome  JobOutcome
	Fence    int64         // JobRan, JobDuplicate: the fence of the run whose outcome Do returned
	Duration time.Duration // from the call to its return
	Err      error
}
