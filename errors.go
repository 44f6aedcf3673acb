package redislock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
)

// The errors shared by every backend are those of package lease, so that
// errors.Is matches across backends.
var (
	// ErrNotObtained means the lock is held by someone else: it was still held
	// when the retry strategy gave up or the context ended (then the error also
	// matches the context's error). It never stands for an unreachable Redis.
	ErrNotObtained = lease.ErrNotObtained

	// ErrNotHeld is returned by Refresh, Release and TTL when this Lock's grant
	// is no longer held: it expired, was released, or was never confirmed on a
	// majority. Methods on a nil *Lock return it too.
	ErrNotHeld = lease.ErrNotHeld

	// ErrLockLost is returned by Run when the lock was lost while fn ran: a
	// renewal found it gone (the cause matches ErrNotHeld), or renewals could
	// not get through before its validity ended (ErrLeaseExpired, joined with
	// the last renewal's error). fn's context was cancelled no later than
	// ValidUntil.
	ErrLockLost = lease.ErrLockLost

	// ErrReleased is returned by Run (and RunMulti) when the lock was
	// released while fn ran: fn, or another goroutine, called its Release.
	// fn's context was cancelled when that Release was called, with
	// ErrReleased as its cause, and Run did not release the lock again.
	// What fn did after the Release ran without the lock.
	ErrReleased = lease.ErrReleased

	// ErrLeaseExpired is the cause of a loss when the validity ended before
	// a renewal got through: Redis was unreachable, slow or paused.
	ErrLeaseExpired = lease.ErrLeaseExpired

	// ErrGrantExpired means a grant or refresh was confirmed only after the
	// validity it asked for had passed (the round trip took longer than TTL
	// minus drift). The partial grant was released; nothing is held.
	ErrGrantExpired = lease.ErrGrantExpired

	// ErrInvalidArgument is matched by every error about bad input: an empty
	// key, a TTL that leaves no validity or exceeds MaxTTL, a nil client, an
	// invalid option. Such errors are returned before any call to Redis.
	ErrInvalidArgument = lease.ErrInvalidArgument

	// ErrClosed is returned by a Client's methods after Close.
	ErrClosed = lease.ErrClosed

	// ErrStaleFence is returned by FencedSet and the Store when a newer fence
	// has already written the resource: the writer's lock was superseded.
	ErrStaleFence = lease.ErrStaleFence

	// ErrNotFound is returned by the Store's Get for a key without record.
	ErrNotFound = lease.ErrNotFound

	// ErrNoQuorum means a majority of the nodes could not be reached or
	// answered with errors, so the outcome of the operation is unknown or the
	// operation could not be done. The per-node causes are joined to it as
	// *NodeError values.
	ErrNoQuorum = errors.New("redislock: no majority of nodes reachable")

	// ErrNotReplicated means fewer replicas than WithReplicas asks for
	// acknowledged a grant or a refresh in time (a *ReplicaError says how
	// many did). An Obtain that fails with it has released its grant.
	ErrNotReplicated = errors.New("redislock: not acknowledged by enough replicas")
)

// ReplicaError is a grant or refresh that fewer than Want replicas
// acknowledged within Timeout (WithReplicas): Acked did. It matches
// ErrNotReplicated.
type ReplicaError struct {
	Want, Acked int
	Timeout     time.Duration
}

func (e *ReplicaError) Error() string {
	return fmt.Sprintf("%v: %d of %d within %v", ErrNotReplicated, e.Acked, e.Want, e.Timeout)
}

// Unwrap returns ErrNotReplicated.
func (e *ReplicaError) Unwrap() error { return ErrNotReplicated }

// NodeError is the error of one Redis node: its index in the client list (0
// in single mode) and the cause, which may be a network error, a context
// error or a Redis error reply (WRONGTYPE, OOM, READONLY, LOADING, MISCONF...).
// A call that got no reply in time from a node that no call had reached
// (or whose last call had not) says why, whatever the TTL: the error of a
// dial of the node (matched by errors.Is: syscall.ECONNREFUSED, ...), a
// server that accepts connections but does not answer, or a connect that
// has no answer yet; it still matches the timeout. Its message names the
// node in quorum mode only.
type NodeError struct {
	Node int
	Err  error

	quorum bool // the Client has several nodes: name this one
}

func (e *NodeError) Error() string {
	cause := "unknown error"
	if e.Err != nil {
		cause = strings.TrimPrefix(e.Err.Error(), "redislock: ")
	}
	if e.quorum {
		return fmt.Sprintf("redislock: node %d: %s", e.Node, cause)
	}
	return "redislock: " + cause
}

// Unwrap returns the node's cause.
func (e *NodeError) Unwrap() error { return e.Err }

// QuorumError is the outcome of a quorum operation that had no majority:
// Err (ErrNoQuorum when too few nodes answered, ErrNotObtained when a
// majority answered but other holders denied the grant) and the errors of
// the nodes that failed, each a *NodeError. errors.Is matches Err and each
// node's error; the message is one line.
type QuorumError struct {
	Err   error
	Nodes []error
}

func (e *QuorumError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	for i, n := range e.Nodes {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(strings.TrimPrefix(n.Error(), "redislock: "))
	}
	return b.String()
}

// Unwrap returns Err and the nodes' errors.
func (e *QuorumError) Unwrap() []error { return append([]error{e.Err}, e.Nodes...) }

func invalid(format string, args ...any) error { return backend.Invalid(format, args...) }
