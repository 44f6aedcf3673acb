// Package errs defines the errors of package lease, which documents and
// exports them, here so that the machinery lease shares with lease/backend
// can return them too.
package errs

import (
	"errors"
	"fmt"
)

// The sentinels; see package lease for what each means.
var (
	ErrNotObtained     = errors.New("redislock: not obtained, held by another")
	ErrNotHeld         = errors.New("redislock: lock not held")
	ErrLockLost        = errors.New("redislock: lock lost")
	ErrLeaseExpired    = errors.New("redislock: lease expired before a renewal got through")
	ErrInvalidArgument = errors.New("redislock: invalid argument")
	ErrClosed          = errors.New("redislock: client closed")
	ErrStaleFence      = errors.New("redislock: stale fencing token")
	ErrGrantExpired    = errors.New("redislock: grant confirmed after its validity")
	ErrNotFound        = errors.New("redislock: record not found")
)

// Invalid returns an error matching ErrInvalidArgument with the formatted
// message.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// Join returns an error matching both a and b, with a one-line message
// "a: b"; either may be nil.
func Join(a, b error) error {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return fmt.Errorf("%w: %w", a, b)
}
