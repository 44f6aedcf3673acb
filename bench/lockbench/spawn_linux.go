package lockbench

import "syscall"

// sysProcAttr kills spawned servers if the tool itself dies without cleanup.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
