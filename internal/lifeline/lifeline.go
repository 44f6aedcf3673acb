// Package lifeline starts child processes that do not outlive the process
// that starts them, however it ends: a test that fails, panics, times out
// or is killed with SIGKILL leaves no server or child test binary behind.
//
//   - On Linux every child gets SIGKILL when its parent dies (Pdeathsig).
//     Linux sends that signal when the thread that forked the child exits,
//     not only when the process does, and the Go runtime ends a thread
//     whose goroutine exits locked to it: so the child is forked on a
//     goroutine locked to its OS thread, which keeps that thread until the
//     child has exited.
//   - A child that runs Go code linking this package (a re-executed test
//     binary: StartWatched) also holds the read end of a pipe whose write
//     end only its parent holds. When the last writer is gone (the parent
//     died) the kernel sends the child SIGKILL: the pipe is in O_ASYNC
//     mode with that signal (F_SETSIG), so no goroutine waits for it (one
//     would be a leak to goleak). This holds where Pdeathsig may not: in a
//     child whose credentials change (which clears Pdeathsig), or a
//     Pdeathsig lost to a thread.
//
// On other systems Start and StartWatched are cmd.Start.
//
// Start and StartWatched take the place of cmd.Start; the caller waits for
// the child with cmd.Wait as usual. The package knows nothing of package
// testing (internal/redisproc's servers use it, also in the benchmark
// tool); internal/proctest adds the test's own cleanup.
package lifeline

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// envVar tells a child started by StartWatched which descriptor is its
// lifeline, and which process holds the other end: "fd:ppid".
const envVar = "REDISLOCK_LIFELINE"

// Start starts cmd, as cmd.Start does, as a child that dies with this
// process (on Linux; elsewhere it is cmd.Start). It adds Pdeathsig to
// cmd.SysProcAttr, keeping the rest. The caller waits for the child with
// cmd.Wait.
func Start(cmd *exec.Cmd) error { return start(cmd, nil) }

// StartWatched is Start for a child that runs Go code linking this package
// (a test binary run again): the child is also killed when the pipe from
// this process has no writer left. The pipe is the child's descriptor
// 3+len(cmd.ExtraFiles); the child's environment names it.
func StartWatched(cmd *exec.Cmd) error {
	if !canWatch {
		return Start(cmd)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("lifeline: %w", err)
	}
	defer r.Close() // the child has its own copy
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(slices.Clip(env), fmt.Sprintf("%s=%d:%d", envVar, 2+len(cmd.ExtraFiles), os.Getpid()))
	if err := start(cmd, w); err != nil {
		w.Close()
		return err
	}
	return nil
}

// start starts cmd on a goroutine that keeps its OS thread until the child
// has exited (see the package doc); line, the write end of the child's
// lifeline if it has one, is closed then.
func start(cmd *exec.Cmd, line *os.File) error {
	setPdeathsig(cmd)
	started := make(chan error, 1)
	go func() { // ends when the child has exited (at once if it did not start)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err != nil {
			return
		}
		if waitExited(cmd.Process.Pid) && line != nil {
			line.Close()
		}
	}()
	return <-started
}

func init() { watch() }

// watch, in a child started by StartWatched, arms its lifeline: the
// process is killed when the pipe from its parent has no writer left (see
// arm). The variable is removed from the environment, so that this
// process's own children do not take the descriptor for theirs.
func watch() {
	v, ok := os.LookupEnv(envVar)
	if !ok {
		return
	}
	_ = os.Unsetenv(envVar)
	fdText, ppidText, _ := strings.Cut(v, ":")
	fd, err := strconv.Atoi(fdText)
	ppid, err2 := strconv.Atoi(ppidText)
	if err != nil || err2 != nil || fd < 3 || ppid != os.Getppid() {
		// Not this process's lifeline: the variable came through a process
		// that does not watch, or is malformed.
		return
	}
	if err := arm(fd); err != nil {
		fmt.Fprintf(os.Stderr, "lifeline: descriptor %d: %v; this process does not watch its parent\n", fd, err)
	}
}
