package stampede

import (
	"errors"
	"fmt"
)

var (
	// ErrFillFailed is matched by every error that comes from a fill: the
	// fill's own error (which the returned error also matches), a panic in
	// it (*PanicError), or, for callers that waited in other processes, the
	// failure the filling process recorded (*FillError).
	ErrFillFailed = errors.New("redislock: stampede: fill failed")

	// ErrMissing is what a fill returns (or wraps) to say that the value
	// does not exist. With WithNegativeTTL the miss is cached; Do's error
	// then matches ErrMissing for as long.
	ErrMissing = errors.New("redislock: stampede: value missing")

	// ErrPanicked is matched by the error of a fill that panicked, in the
	// process where it ran (*PanicError) and in the others (*FillError).
	ErrPanicked = errors.New("redislock: stampede: fill panicked")
)

// FillError is the outcome of a fill that ran in another process (or a
// miss cached by WithNegativeTTL), as its record in the Store tells it:
// only the message of the original error survives.
type FillError struct {
	Key      string // the key Do was called with
	Fence    int64  // the fence of the lock the fill ran under
	Message  string // the fill's error message
	Missing  bool   // the fill reported ErrMissing
	Panicked bool   // the fill panicked
}

func (e *FillError) Error() string {
	return fmt.Sprintf("redislock: stampede: fill of %q failed in another process (fence %d): %s", e.Key, e.Fence, e.Message)
}

// Is reports whether target is ErrFillFailed, or ErrMissing for a miss,
// or ErrPanicked for a panic.
func (e *FillError) Is(target error) bool {
	return target == ErrFillFailed || target == ErrMissing && e.Missing || target == ErrPanicked && e.Panicked
}

// PanicError is the error of a fill that panicked: the panic was recovered
// in the flight that ran the fill, the lock released, and every caller of
// the flight got this error.
type PanicError struct {
	Value any    // what the fill panicked with
	Stack []byte // the stack of the fill's goroutine at the panic
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("redislock: stampede: fill panicked: %v", e.Value)
}

// Is reports whether target is ErrFillFailed or ErrPanicked.
func (e *PanicError) Is(target error) bool { return target == ErrFillFailed || target == ErrPanicked }

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// errGoexit is the error of a fill that called runtime.Goexit.
var errGoexit = fmt.Errorf("%w: fill called runtime.Goexit", ErrFillFailed)

// fillFailed wraps a fill's own error.
func fillFailed(err error) error {
	var pe *PanicError
	if errors.As(err, &pe) || errors.Is(err, ErrFillFailed) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrFillFailed, err)
}
