package main

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redislock-go/redislock"
)

// Exit codes. Besides these, run exits with the command's own code, or
// 128+N when the command was killed by signal N (as a shell reports it).
const (
	exitOK          = 0
	exitFailure     = 1   // any other failure (a lock key not written by redislock, a bad reply)
	exitUsage       = 64  // bad flags or arguments (sysexits EX_USAGE)
	exitUnavailable = 69  // Redis unreachable, an error reply, no quorum (EX_UNAVAILABLE)
	exitConflict    = 75  // default of --conflict-exit-code: held by another, --nonblock (EX_TEMPFAIL)
	exitNoPerm      = 77  // Redis refused the user: ACL (NOPERM), bad password (EX_NOPERM)
	exitTimeout     = 124 // --wait passed with the lock still held by another (as timeout(1))
	exitLost        = 125 // the lock was lost while the job ran; the job was stopped
	exitCannotExec  = 126 // the command was found but could not be run (as a shell)
	exitNotFound    = 127 // the command was not found (as a shell)
	exitSignal      = 128 // + N: redislock was interrupted by signal N before the command ran
)

// exitError is an error with the exit code it ends redislock with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitWith(code int, err error) error { return &exitError{code, err} }

func usageError(format string, args ...any) error {
	return exitWith(exitUsage, fmt.Errorf(format, args...))
}

// codeOf returns the exit code for err.
func codeOf(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, redislock.ErrInvalidArgument):
		return exitUsage
	case denied(err):
		return exitNoPerm
	case errors.Is(err, redislock.ErrNoQuorum), unreachable(err):
		return exitUnavailable
	}
	return exitFailure
}

// denied reports an ACL or authentication refusal: of a command, of a key
// or channel (NOPERM), of a command called by a script ("The user executing
// the script can't run this command", Redis 7.0), of the user (WRONGPASS,
// NOAUTH).
func denied(err error) bool {
	s := err.Error()
	for _, p := range []string{"NOPERM", "NOAUTH", "WRONGPASS", "can't run this command"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// unreachable reports an error of a Redis node (the connection, or an
// error reply), as the library reports it, or of the network.
func unreachable(err error) bool {
	var ne *redislock.NodeError
	var nerr net.Error
	return errors.As(err, &ne) || errors.As(err, &nerr)
}
