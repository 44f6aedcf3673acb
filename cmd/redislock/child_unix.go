//go:build unix

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
	"unsafe"
)

// pollEvery is how often a stopping process group is checked.
const pollEvery = 5 * time.Millisecond

// killWait bounds the wait for a process group after SIGKILL.
const killWait = 2 * time.Second

// child is the command, the leader of its own process group.
type child struct {
	cmd        *exec.Cmd
	pgid       int
	foreground bool // the group took the terminal; give it back at exit
	done       chan struct{}
	waitErr    error // set before done is closed
}

// startChild starts argv with env in a process group of its own. When
// redislock runs in the foreground of a terminal, the group takes the
// terminal, so that the command can read it (and ^C reaches the command
// directly).
func startChild(argv, env []string) (*child, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		code := exitNotFound
		if errors.Is(err, fs.ErrPermission) {
			code = exitCannotExec
		}
		return nil, exitWith(code, fmt.Errorf("command %q: %w", argv[0], err))
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	attr := &syscall.SysProcAttr{Setpgid: true}
	fg := inForeground()
	if fg {
		attr.Foreground, attr.Ctty = true, int(os.Stdin.Fd())
	}
	dieWithRedislock(attr)
	cmd.SysProcAttr = attr
	becomeSubreaper()
	if err := cmd.Start(); err != nil {
		return nil, exitWith(exitCannotExec, fmt.Errorf("command %q: %w", argv[0], err))
	}
	c := &child{cmd: cmd, pgid: cmd.Process.Pid, foreground: fg, done: make(chan struct{})}
	go func() { // ends when the command exits
		c.waitErr = cmd.Wait()
		if c.foreground {
			takeTerminal()
		}
		close(c.done)
	}()
	return c, nil
}

// signal sends sig to the whole process group.
func (c *child) signal(sig syscall.Signal) { _ = syscall.Kill(-c.pgid, sig) }

// exited reports whether the command itself has exited (and was reaped).
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// groupAlive reports whether any process of the group is left, reaping
// the group's orphans that were passed to redislock (Linux: redislock is
// their subreaper) once the command itself was reaped.
func (c *child) groupAlive() bool {
	if c.exited() {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-c.pgid, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
	return syscall.Kill(-c.pgid, 0) == nil
}

// stop sends the group SIGTERM, then SIGKILL after grace if any process is
// left, and waits for the group to go (after SIGKILL, at most killWait: a
// zombie that nobody reaps stays in the group).
func (c *child) stop(grace time.Duration) {
	c.signal(syscall.SIGTERM)
	if c.waitGone(grace) {
		return
	}
	c.signal(syscall.SIGKILL)
	c.waitGone(killWait)
}

// waitGone waits up to d for the command to exit and its group to be empty.
func (c *child) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if c.exited() && !c.groupAlive() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
}

// exitCode is the command's exit code, 128+N when signal N killed it.
func (c *child) exitCode() int {
	ps := c.cmd.ProcessState
	if ps == nil {
		return exitFailure
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignal + int(ws.Signal())
	}
	return ps.ExitCode()
}

// inForeground reports whether stdin is a terminal whose foreground
// process group is redislock's.
func inForeground() bool {
	if !isTerminal(os.Stdin) {
		return false
	}
	var pgrp int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, os.Stdin.Fd(), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp))); e != 0 {
		return false
	}
	return int(pgrp) == syscall.Getpgrp()
}

// takeTerminal makes redislock's process group the terminal's foreground
// group again (SIGTTOU, which a background group gets for that, ignored).
func takeTerminal() {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, os.Stdin.Fd(), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&pgrp)))
}
