package lifeline

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setPdeathsig makes the kernel send SIGKILL to cmd's process when the
// thread that forks it exits.
func setPdeathsig(cmd *exec.Cmd) {
	if !pdeathsig {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// canWatch is true: a pipe can signal its end (arm).
const canWatch = true

// pdeathsig is false only in a test that proves the lifeline alone.
var pdeathsig = true

// waitExited blocks until process pid has exited, without reaping it
// (waitid with WNOWAIT, as the os package itself did before pidfds): the
// caller's cmd.Wait collects its status. It also returns when pid is no
// longer this process's child to wait for (already reaped).
func waitExited(pid int) bool {
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, unix.P_PID, uintptr(pid), uintptr(unsafe.Pointer(&info)), unix.WEXITED|unix.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return true
		}
	}
}

// arm makes the kernel kill this process when fd, the read end of a pipe,
// has no writer left: in O_ASYNC mode, owned by this process, a pipe
// signals its readers when its last writer closes, with the signal that
// F_SETSIG names. A parent gone already is found by a read: end-of-file.
func arm(fd int) error {
	syscall.CloseOnExec(fd) // not for this process's children
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETOWN, os.Getpid()); err != nil {
		return err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETSIG, int(unix.SIGKILL)); err != nil {
		return err
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags|unix.O_ASYNC|unix.O_NONBLOCK); err != nil {
		return err
	}
	var b [1]byte
	for {
		n, err := unix.Read(fd, b[:])
		switch {
		case n == 0 && err == nil: // end-of-file: the parent is gone
			_ = unix.Kill(os.Getpid(), unix.SIGKILL)
			select {}
		case n > 0 || errors.Is(err, unix.EINTR):
			continue // the parent writes nothing; a signal interrupted the read
		case errors.Is(err, unix.EAGAIN):
			return nil // the parent is there: armed
		default:
			return err
		}
	}
}
