package semaphore

import (
	"errors"
	"fmt"
)

// ErrLimitMismatch means the semaphore is in use (it has holders or
// waiters) with another limit than this Semaphore's: every user of a name
// must agree on its limit. A *LimitError says which.
var ErrLimitMismatch = errors.New("redislock: semaphore: in use with another limit")

// LimitError is the error of an Acquire on a semaphore in use with another
// limit.
type LimitError struct {
	Name         string
	Limit, InUse int // this Semaphore's limit, and the one in use
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("redislock: semaphore %q: limit %d, but in use with limit %d", e.Name, e.Limit, e.InUse)
}

// Is reports whether target is ErrLimitMismatch.
func (e *LimitError) Is(target error) bool { return target == ErrLimitMismatch }
