package redislock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// The errors shared by every backend are package lease's, re-exported
// here: each is documented there, and errors.Is matches it across
// backends.
var (
	ErrNotObtained     = lease.ErrNotObtained     // held by another; never an unreachable Redis
	ErrNotHeld         = lease.ErrNotHeld         // not held by this grant; methods on a nil *Lock return it too
	ErrLockLost        = lease.ErrLockLost        // Run: the lock was lost while fn ran
	ErrReleased        = lease.ErrReleased        // Run, RunMulti: the lock was released while fn ran
	ErrLeaseExpired    = lease.ErrLeaseExpired    // a loss's cause: no renewal got through before the validity ended
	ErrGrantExpired    = lease.ErrGrantExpired    // confirmed after its validity; nothing is held
	ErrInvalidArgument = lease.ErrInvalidArgument // bad input, refused before any call to Redis
	ErrClosed          = lease.ErrClosed          // a Client's method after Close
	ErrStaleFence      = lease.ErrStaleFence      // FencedSet, the Store: a newer fence wrote first
	ErrNotFound        = lease.ErrNotFound        // the Store's Get: no record at the key
)

// The errors of this package alone.
var (
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

func invalid(format string, args ...any) error { return lease.Invalid(format, args...) }
