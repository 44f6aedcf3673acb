package lease

import "github.com/redislock-go/redislock/lease/internal/errs"

// The errors every backend returns, matched with errors.Is. The root
// package redislock re-exports them under the same names.
var (
	// ErrNotObtained means the lock is held by someone else: it was still
	// held when the retry strategy gave up or the context ended (then the
	// error also matches the context's error). It never stands for an
	// unreachable backend.
	ErrNotObtained = errs.ErrNotObtained

	// ErrNotHeld is returned by Refresh and Release (and a backend's TTL)
	// when the grant is no longer held: it expired, was released, or was
	// never confirmed.
	ErrNotHeld = errs.ErrNotHeld

	// ErrLockLost means a held lock was lost while work ran under it: a
	// renewal found it gone, or renewals could not get through before its
	// validity ended. Run returns it; a Held handle reports it.
	ErrLockLost = errs.ErrLockLost

	// ErrReleased means the Lock was released while work still ran under
	// it: fn (or another goroutine) called the Lock's own Release while
	// Run, RunLock or Hold kept it. fn's context (the Held's Context) ends
	// at once with it as the cause, whatever the Release's outcome (its
	// caller gets that), and Run returns it (with fn's own error) without
	// releasing again: the work after the Release ran without the lock.
	ErrReleased = errs.ErrReleased

	// ErrLeaseExpired is the cause of a loss when the validity last
	// confirmed ended before a renewal got through (the backend was
	// unreachable, slow or paused); it is joined with the last renewal's
	// error, if any.
	ErrLeaseExpired = errs.ErrLeaseExpired

	// ErrInvalidArgument is matched by every error about bad input: an
	// empty key, a TTL that leaves no validity or exceeds MaxTTL, an
	// invalid option. Such errors are returned before the backend is
	// called.
	ErrInvalidArgument = errs.ErrInvalidArgument

	// ErrClosed is returned by a backend after it was closed.
	ErrClosed = errs.ErrClosed

	// ErrStaleFence means a write carried a fence below the newest one the
	// resource has accepted: the writer's lock was superseded.
	ErrStaleFence = errs.ErrStaleFence

	// ErrGrantExpired means a grant or a refresh was confirmed only after
	// the validity it asked for had passed (the round trip took longer than
	// the TTL minus drift). Nothing is held by it.
	ErrGrantExpired = errs.ErrGrantExpired

	// ErrNotFound is returned by Store.Get for a key that holds no record.
	ErrNotFound = errs.ErrNotFound
)
