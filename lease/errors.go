package lease

import (
	"errors"
	"fmt"
	"strings"
)

// The errors every backend returns, matched with errors.Is; the root
// package redislock re-exports them under the same names. Backends and
// patterns build their own on them with Invalid, Join and Wrap.
var (
	// ErrNotObtained means the lock is held by someone else: it was still
	// held when the retry strategy gave up or the context ended (then the
	// error also matches the context's error). It never stands for an
	// unreachable backend.
	ErrNotObtained = errors.New("redislock: not obtained, held by another")

	// ErrNotHeld is returned by Refresh, Release and TTL when the grant is
	// no longer held: it expired, was released, or was never confirmed (on
	// a majority, for a backend of several nodes). Methods on a nil Lock of
	// this project's backends return it too.
	ErrNotHeld = errors.New("redislock: lock not held")

	// ErrLockLost means a held lock was lost while work ran under it: a
	// renewal found it gone (the cause matches ErrNotHeld), or renewals
	// could not get through before its validity ended (ErrLeaseExpired).
	// Run returns it, after cancelling fn's context no later than
	// ValidUntil; a Held reports it.
	ErrLockLost = errors.New("redislock: lock lost")

	// ErrReleased means the Lock was released while work still ran under
	// it: fn (or another goroutine) called the Lock's own Release while
	// Run, RunLock or Hold kept it. fn's context (the Held's Context) ends
	// at once with it as the cause, whatever the Release's outcome (its
	// caller gets that), and Run returns it (with fn's own error) without
	// releasing again: the work after the Release ran without the lock.
	ErrReleased = errors.New("redislock: lock released while work ran under it")

	// ErrLeaseExpired is the cause of a loss when the validity last
	// confirmed ended before a renewal got through (the backend was
	// unreachable, slow or paused); it is joined with the last renewal's
	// error, if any.
	ErrLeaseExpired = errors.New("redislock: lease expired before a renewal got through")

	// ErrInvalidArgument is matched by every error about bad input: an
	// empty key, a TTL that leaves no validity or exceeds MaxTTL, a nil
	// client, an invalid option. Such errors are returned before the
	// backend is called.
	ErrInvalidArgument = errors.New("redislock: invalid argument")

	// ErrClosed is returned by a backend's client after its Close.
	ErrClosed = errors.New("redislock: client closed")

	// ErrStaleFence means a write carried a fence below the newest one the
	// resource has accepted (Store.Put, the Redis client's FencedSet): the
	// writer's lock was superseded.
	ErrStaleFence = errors.New("redislock: stale fencing token")

	// ErrGrantExpired means a grant or a refresh was confirmed only after
	// the validity it asked for had passed (the round trip took longer than
	// the TTL minus drift). The partial grant was released; nothing is held
	// by it.
	ErrGrantExpired = errors.New("redislock: grant confirmed after its validity")

	// ErrNotFound is returned by Store.Get for a key that holds no record.
	ErrNotFound = errors.New("redislock: record not found")
)

// Invalid returns an error matching ErrInvalidArgument with the formatted
// message, for backends and patterns that check their own input.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// Join returns an error matching both a and b, with a one-line message
// "a: b" that says each thing once: b's "redislock: " prefix is left out,
// and so is all of b when a's message already ends with it (a node's
// error that is the context's, joined with the context's error). Either
// may be nil. Backends use it to keep a context's error next to their own
// (ErrNotObtained and ctx.Err(), say).
func Join(a, b error) error { return joinSaying(a, "", b) }

// joinSaying is Join with words put between the two messages ("a: words:
// b").
func joinSaying(a error, words string, b error) error {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	msg, tail := a.Error(), strings.TrimPrefix(b.Error(), "redislock: ")
	if !strings.HasSuffix(msg, tail) {
		if words != "" {
			msg += ": " + words
		}
		msg += ": " + tail
	}
	return &joined{msg: msg, errs: []error{a, b}}
}

// Wrap returns an error matching err whose one-line message puts what was
// being done in front of err's: "redislock: <format>: <err>", with err's
// own "redislock: " prefix left out, so that a wrapped error of this
// library does not say "redislock: redislock:".
func Wrap(err error, format string, args ...any) error {
	return &joined{
		msg:  "redislock: " + fmt.Sprintf(format, args...) + ": " + strings.TrimPrefix(err.Error(), "redislock: "),
		errs: []error{err},
	}
}

// joined is the error of Join and Wrap.
type joined struct {
	msg  string
	errs []error
}

func (e *joined) Error() string   { return e.msg }
func (e *joined) Unwrap() []error { return e.errs }
