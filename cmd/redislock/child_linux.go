package main

import "syscall"

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// dieWithRedislock has the kernel SIGKILL the command if redislock dies
// (SIGKILL, OOM): the lock is no longer renewed, so the command must not go
// on. Processes the command started are not covered: they are stopped by
// the lease ending only in the sense that their fence goes stale.
func dieWithRedislock(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// becomeSubreaper makes orphaned descendants (a grandchild whose parent
// exited) redislock's children instead of init's, so that redislock can
// reap them and tell when the process group is empty.
func becomeSubreaper() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}
