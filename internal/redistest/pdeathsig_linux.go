package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the server die with the test process, so a test that
// panics (and skips its cleanups) leaves no redis-server behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
