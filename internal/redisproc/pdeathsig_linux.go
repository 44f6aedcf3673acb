package redisproc

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes cmd die with the process that started it, so a test
// that panics (and skips its cleanups) leaves no redis-server behind.
//
// Linux sends the signal when the OS thread that forked the child exits;
// the Go runtime keeps its threads unless a goroutine exits while locked to
// one (runtime.LockOSThread), which nothing here does.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
