package dedup

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrInProgress is matched by the *InProgressError a duplicate gets
	// while another worker runs its job (unless WithRetry).
	ErrInProgress = errors.New("redislock: job in progress elsewhere")

	// ErrFailed is matched by the *FailedError a repeat of a job gets when
	// an earlier run failed and the scope records failures
	// (UntilDoneOrFailed, ForPeriod).
	ErrFailed = errors.New("redislock: job failed in an earlier run")

	// ErrBadRecord means the Store holds, at a job's key, something that is
	// not a record this package wrote: another user of the same keys.
	ErrBadRecord = errors.New("redislock: not a dedup record")
)

// InProgressError is returned to a duplicate while another worker runs the
// job. It matches ErrInProgress.
type InProgressError struct {
	ID string
	// Holder is the running worker's identity (WithHolder); "" if it
	// recorded none or the backend could not be asked.
	Holder string
	// TTL is the running worker's lease left when asked: if that worker
	// has crashed, the job can run again after it. 0 if unknown.
	TTL time.Duration
	// RetryAfter is when to deliver the job again: TTL and 1 ms, by which
	// time the job is done (a repeat gets its recorded outcome), or its
	// lease was renewed (another InProgressError, with a new RetryAfter),
	// or its worker crashed and the job can run. The Group's lease when
	// TTL is unknown (no worker holds the job longer); 0 when the job's
	// lock was free again when asked.
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string {
	msg := fmt.Sprintf("%v: job %q", ErrInProgress, e.ID)
	if e.Holder != "" {
		msg += " held by " + e.Holder
	}
	if e.TTL > 0 {
		msg += fmt.Sprintf(" for %v more", e.TTL)
	}
	return msg
}

// Is reports whether target is ErrInProgress.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// FailedError is the recorded failure of an earlier run, returned to its
// repeats. It matches ErrFailed.
type FailedError struct {
	ID    string
	Fence int64  // the fence of the run that failed
	Msg   string // its error's message
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("%v: job %q (fence %d): %s", ErrFailed, e.ID, e.Fence, e.Msg)
}

// Is reports whether target is ErrFailed.
func (e *FailedError) Is(target error) bool { return target == ErrFailed }
