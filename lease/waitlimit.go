package lease

import (
	"fmt"
	"time"
)

// DefaultMaxWait is how long a backend's Obtain waits for a held lock when
// the caller's context has no deadline, unless configured otherwise: long
// enough not to give up on a holder that is alive and renewing for a while.
// It is a cap, as a backend's WithMaxWait is: no attempt starts after it.
const DefaultMaxWait = 30 * time.Second

// WaitLimitError is the error of an Obtain that stopped waiting for a held
// lock because its wait limit passed (a backend's WithMaxWait or its
// default; a context deadline ends a wait with the context's error
// instead): no attempt starts after the limit, so the call returned within
// the limit plus one attempt's round trip. It matches ErrNotObtained, and
// Err, the error of the last attempt. TTL is the holder's remaining lease
// that the last attempt saw, negative when unknown (in the Redis client's
// quorum mode: the longest among the nodes that answered "held"); a caller
// that wants to wait for that lease to end can call Obtain again.
type WaitLimitError struct {
	Limit time.Duration // the wait limit that passed
	TTL   time.Duration // the remaining lease last seen; < 0: unknown
	Err   error         // the last attempt's error
}

func (e *WaitLimitError) Error() string {
	if e.TTL < 0 {
		return fmt.Sprintf("redislock: lock not obtained: wait limit %v reached", e.Limit)
	}
	return fmt.Sprintf("redislock: lock not obtained: wait limit %v reached, held for %v more", e.Limit, e.TTL)
}

// Unwrap returns the last attempt's error, which matches ErrNotObtained.
func (e *WaitLimitError) Unwrap() error { return e.Err }

// Is matches ErrNotObtained, also when the last attempt's error was lost.
func (e *WaitLimitError) Is(target error) bool { return target == ErrNotObtained }
