package lifeline_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/lifeline"
	"github.com/redislock-go/redislock/internal/proctest"
	"github.com/redislock-go/redislock/internal/testkit"
)

// A watched child whose parent is killed exits by its lifeline alone,
// with no Pdeathsig: it reads end-of-file on the pipe from its parent.
func TestWatchedChildExitsWithItsParent(t *testing.T) {
	t.Parallel()
	parent := proctest.Start(t, "TestParentWithoutPdeathsig", "parent", "")
	var pid int
	_, err := fmt.Sscanf(parent.Next(t), "CHILD %d", &pid)
	require.NoError(t, err)
	child := proctest.Track(t, pid)
	require.False(t, child.Exited(0), "the child not running before its parent died")
	parent.Signal(t, syscall.SIGKILL)
	require.Error(t, parent.Wait(t))
	require.True(t, child.Exited(testkit.Bound), "watched child %d outlived its killed parent", pid)
}

// TestParentWithoutPdeathsig starts a watched child without Pdeathsig,
// says its pid and waits to be killed.
func TestParentWithoutPdeathsig(t *testing.T) {
	if _, ok := proctest.Child("parent"); !ok {
		t.Skip("only runs as a child process")
	}
	lifeline.DisablePdeathsig()
	child := proctest.Start(t, "TestIdleChild", "idle", "")
	require.Equal(t, "READY", child.Next(t))
	proctest.Emit("CHILD %d", child.Pid())
	for range proctest.Commands() { // until killed
	}
}

// TestIdleChild is a child that runs until it is killed.
func TestIdleChild(t *testing.T) { proctest.Idle(t, "idle") }

// Linux sends Pdeathsig when the thread that forked the child exits, and
// the Go runtime ends the thread of a goroutine that exits locked to it.
// A child started from such a goroutine lives on: Start forks it on a
// thread of its own, which lives as long as the child.
func TestChildOutlivesTheThreadThatStartedIt(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("cat")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	type started struct {
		tid int
		err error
	}
	ch := make(chan started, 1)
	for {
		go func() { // ends at once, ending its thread (locked, never unlocked)
			runtime.LockOSThread()
			tid := syscall.Gettid()
			if tid == os.Getpid() {
				// The main thread is never ended: try from another.
				runtime.UnlockOSThread()
				ch <- started{tid: tid}
				return
			}
			ch <- started{tid, lifeline.Start(cmd)}
		}()
		s := testkit.Recv(t, ch)
		if s.tid == os.Getpid() {
			continue
		}
		require.NoError(t, s.err)
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		// The end of a thread is announced by no event this process can
		// wait for: poll its /proc entry (every 5 ms, for at most Bound).
		task := "/proc/self/task/" + strconv.Itoa(s.tid)
		require.Eventually(t, func() bool {
			_, err := os.Stat(task)
			return os.IsNotExist(err)
		}, testkit.Bound, 5*time.Millisecond, "thread %d did not end", s.tid)
		break
	}
	// The thread has gone, and with it a Pdeathsig tied to it: a child
	// that got SIGKILL answers nothing.
	_, err = stdin.Write([]byte("ping\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the child died with the thread that started it")
	require.Equal(t, "ping\n", line)
}
