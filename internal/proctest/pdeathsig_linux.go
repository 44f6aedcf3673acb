package proctest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the child die with the test process, so that a test
// that fails hard leaves no process behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
