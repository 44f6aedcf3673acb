//go:build unix && !linux

package main

import (
	"syscall"
	"time"
)

// pollEvery is how often the command's process group is checked.
const pollEvery = 5 * time.Millisecond

// Outside Linux there is no subreaper: orphans go to init, and redislock
// follows the command's process group only. A process that left it
// (setsid, setpgid, coreutils timeout) is not stopped.

func dieWithRedislock(*syscall.SysProcAttr) {}

func becomeSubreaper() {}

// reap waits for the command and records its status.
func (c *child) reap() {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(c.pid, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		c.exited(ws)
		return
	}
}

// leftover reports whether a process of the command's group is left.
func (c *child) leftover() bool { return syscall.Kill(-c.pid, 0) == nil }

// kill sends SIGKILL to the command's process group.
func (c *child) kill() { c.signal(syscall.SIGKILL) }

// stop sends the group SIGTERM (and SIGCONT), then SIGKILL after grace if any process is
// left, and waits for the group to go (after SIGKILL, at most killWait: a
// zombie that nobody reaps stays in the group).
func (c *child) stop(grace time.Duration, _ *reporter) {
	c.signal(syscall.SIGTERM)
	c.signal(syscall.SIGCONT)
	if c.waitGone(grace) {
		return
	}
	c.kill()
	c.waitGone(killWait)
}

// waitGone waits up to d for the command to exit and its group to be empty.
func (c *child) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		select {
		case <-c.done:
			if !c.leftover() {
				return true
			}
		default:
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
}
