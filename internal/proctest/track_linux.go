package proctest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Process is a handle on a running process that need not be a child of
// the test (a grandchild, say), held by a pidfd: it names that process
// even once its pid is reused.
type Process struct {
	Pid int
	fd  int
}

// Track opens process pid, which must be running. It is killed, if still
// running, when the test ends.
func Track(t testing.TB, pid int) *Process {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	require.NoError(t, err, "process %d", pid)
	t.Cleanup(func() {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		_ = unix.Close(fd)
	})
	return &Process{Pid: pid, fd: fd}
}

// Exited waits at most d for the process to exit (its pidfd becomes
// readable then) and reports whether it did.
func (p *Process) Exited(d time.Duration) bool {
	end := time.Now().Add(d)
	for {
		fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(max(time.Until(end), 0).Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0
	}
}
