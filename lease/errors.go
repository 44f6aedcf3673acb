package lease

import (
	"errors"
	"fmt"
	"strings"
)

// The errors every backend returns, matched with errors.Is. The root
// package redislock re-exports them under the same names.
var (
	// ErrNotObtained means the lock is held by someone else: it was still
	// held when the retry strategy gave up or the context ended (then the
	// error also matches the context's error). It never stands for an
	// unreachable backend.
	ErrNotObtained = errors.New("redislock: not obtained, held by another")

	// ErrNotHeld is returned by Refresh and Release (and a backend's TTL)
	// when the grant is no longer held: it expired, was released, or was
	// never confirmed.
	ErrNotHeld = errors.New("redislock: lock not held")

	// ErrLockLost means a held lock was lost while work ran under it: a
	// renewal found it gone, or renewals could not get through before its
	// validity ended. Run returns it; a Held handle reports it.
	ErrLockLost = errors.New("redislock: lock lost")

	// ErrInvalidArgument is matched by every error about bad input: an
	// empty key, a TTL that leaves no validity, an invalid option. Such
	// errors are returned before the backend is called.
	ErrInvalidArgument = errors.New("redislock: invalid argument")

	// ErrClosed is returned by a backend after it was closed.
	ErrClosed = errors.New("redislock: client closed")

	// ErrStaleFence means a write carried a fence below the newest one the
	// resource has accepted: the writer's lock was superseded.
	ErrStaleFence = errors.New("redislock: stale fencing token")

	// ErrGrantExpired means a grant or a refresh was confirmed only after
	// the validity it asked for had passed (the round trip took longer than
	// the TTL minus drift). Nothing is held by it.
	ErrGrantExpired = errors.New("redislock: grant confirmed after its validity")

	// ErrNotFound is returned by Store.Get for a key that holds no record.
	ErrNotFound = errors.New("redislock: record not found")
)

// Invalid returns an error matching ErrInvalidArgument with the formatted
// message, for backends and patterns that check their own input.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// Wrap returns an error matching err whose one-line message puts what was
// being done in front of err's: "redislock: <format>: <err>", with err's
// own "redislock: " prefix left out, so that a wrapped error of this
// library does not say "redislock: redislock:".
func Wrap(err error, format string, args ...any) error {
	return &joined{
		msg:  "redislock: " + fmt.Sprintf(format, args...) + ": " + strings.TrimPrefix(err.Error(), "redislock: "),
		errs: [2]error{err, nil},
	}
}
