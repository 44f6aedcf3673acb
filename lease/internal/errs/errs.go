// Package errs defines the errors of package lease, which documents and
// exports them, here so that the machinery lease shares with lease/backend
// can return them too.
package errs

import (
	"errors"
	"fmt"
	"strings"
)

// The sentinels; see package lease for what each means.
var (
	ErrNotObtained     = errors.New("redislock: not obtained, held by another")
	ErrNotHeld         = errors.New("redislock: lock not held")
	ErrLockLost        = errors.New("redislock: lock lost")
	ErrReleased        = errors.New("redislock: lock released while work ran under it")
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
// "a: b" that says each thing once: b's "redislock: " prefix is left out,
// and so is all of b when a's message already ends with it (a node's
// error that is the context's, joined with the context's error). Either
// may be nil.
func Join(a, b error) error { return JoinSaying(a, "", b) }

// JoinSaying is Join with words put between the two messages ("a: words:
// b").
func JoinSaying(a error, words string, b error) error {
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
// own "redislock: " prefix left out.
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
