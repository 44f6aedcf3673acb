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

// killWait is how long processes may outlive SIGKILL before redislock says
// so (Linux: it goes on waiting for them; elsewhere: it gives up on them).
const killWait = 2 * time.Second

// child is the command, the leader of its own process group, and the
// processes it starts: the job. On Linux the job is every descendant of
// redislock, whatever process group or session it moved to (redislock is
// their subreaper); elsewhere it is the command's process group.
type child struct {
	pid        int  // the command's, and its process group's
	foreground bool // the group took the terminal; give it back at exit
	done       chan struct{}
	status     syscall.WaitStatus // the command's, set before done is closed
	// gone is closed once every process of the job has exited and was
	// reaped (Linux only).
	gone chan struct{}
}

// startChild starts argv with env in a process group of its own, and makes
// redislock the subreaper of its descendants (Linux). When redislock runs
// in the foreground of a terminal, the group takes the terminal, so that
// the command can read it (and ^C reaches the command directly).
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
	c := &child{pid: cmd.Process.Pid, foreground: fg, done: make(chan struct{}), gone: make(chan struct{})}
	// redislock reaps the command itself (and, on Linux, every orphan of
	// the job): exec.Cmd's Wait is not used.
	_ = cmd.Process.Release()
	go c.reap() // ends when the job is gone (Linux) or the command exited
	return c, nil
}

// exited is called by reap with the command's status.
func (c *child) exited(ws syscall.WaitStatus) {
	c.status = ws
	if c.foreground {
		takeTerminal()
	}
	close(c.done)
}

// signal sends sig to the command's process group.
func (c *child) signal(sig syscall.Signal) { _ = syscall.Kill(-c.pid, sig) }

// exitCode is the command's exit code, 128+N when signal N killed it.
func (c *child) exitCode() int {
	if c.status.Signaled() {
		return exitSignal + int(c.status.Signal())
	}
	return c.status.ExitStatus()
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
