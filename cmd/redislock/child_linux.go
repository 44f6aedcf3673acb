package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The pace of SIGKILL rounds while processes of the job are left: each
// round finds and kills the processes started since the one before.
const (
	killRetryMin = 10 * time.Millisecond
	killRetryMax = time.Second
)

// dieWithRedislock has the kernel SIGKILL the command if redislock dies
// (SIGKILL, OOM): the lock is no longer renewed, so the command must not go
// on. The command's own descendants are not covered: they keep running
// (see the README's limitations).
func dieWithRedislock(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// becomeSubreaper makes every orphaned descendant of redislock (a process
// whose parent exited, whatever its process group or session) redislock's
// child instead of init's. The job's processes are then exactly
// redislock's descendants, and the job is gone when redislock has no
// child left.
func becomeSubreaper() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// reap reaps every child of redislock: the command, whose status it
// records, and the orphans of the job passed to redislock. When none is
// left (ECHILD), the job is gone: every descendant has exited, since the
// oldest living ancestor below redislock of any descendant is redislock's
// child.
func (c *child) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
		case err != nil: // ECHILD
			close(c.gone)
			return
		case pid == c.pid:
			c.exited(ws)
		}
	}
}

// leftover reports whether a process of the job other than the command
// is alive.
func (c *child) leftover() bool {
	select {
	case <-c.gone:
		return false
	default:
	}
	ps, err := descendants()
	if err != nil {
		return syscall.Kill(-c.pid, 0) == nil
	}
	return len(ps) > 0
}

// kill sends SIGKILL to every process of the job, once.
func (c *child) kill() { c.signalJob(syscall.SIGKILL) }

// signalJob sends sig to every living process of the job, and returns them
// and the errors other than a process being gone, by pid. Without /proc
// (not mounted), it signals the command's process group only.
func (c *child) signalJob(sig syscall.Signal) (ps []proc, failed map[int]error) {
	ps, err := descendants()
	if err != nil {
		c.signal(sig)
		return nil, nil
	}
	failed = make(map[int]error)
	for _, p := range ps {
		if err := signalProc(p, sig); err != nil && err != syscall.ESRCH {
			failed[p.pid] = err
		}
	}
	return ps, failed
}

// stop ends the job: SIGTERM to each of its processes, whatever its
// process group or session (and SIGCONT, so that a stopped one gets it),
// then, after grace, SIGKILL to those left, in rounds until none is left.
// It returns once the job is gone: a process that survives SIGKILL (one
// redislock may not signal, or one stuck in the kernel) is waited for, and
// said so after killWait.
func (c *child) stop(grace time.Duration, out *reporter) {
	c.signalJob(syscall.SIGTERM)
	c.signalJob(syscall.SIGCONT)
	if c.waitGone(grace) {
		return
	}
	began, retry := time.Now(), killRetryMin
	warned := false
	for {
		left, failed := c.signalJob(syscall.SIGKILL)
		if c.waitGone(retry) {
			return
		}
		retry = min(2*retry, killRetryMax)
		if !warned && time.Since(began) >= killWait {
			warned = true
			out.warnf("%d processes of the command are alive %v after SIGKILL (%s): waiting for them to end", len(left), killWait, describe(left, failed))
		}
	}
}

// waitGone waits up to d for the job to be gone.
func (c *child) waitGone(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.gone:
		return true
	case <-t.C:
		return false
	}
}

// proc is a process as /proc/PID/stat shows it.
type proc struct {
	pid, ppid int
	state     byte   // R, S, D, Z, T...
	start     uint64 // clock ticks after boot: with pid, names the process
}

// descendants returns redislock's living descendants, as /proc shows them
// now: its children, theirs, and so on. Zombies are left out.
func descendants() ([]proc, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	children := make(map[int][]proc)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, err := readProc(pid); err == nil {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []proc
	next := []int{os.Getpid()}
	for len(next) > 0 {
		pid := next[0]
		next = next[1:]
		for _, p := range children[pid] {
			next = append(next, p.pid)
			if p.state != 'Z' {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// readProc reads /proc/PID/stat.
func readProc(pid int) (proc, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, err
	}
	// pid (comm) state ppid ...: comm may hold anything, fields follow the
	// last ')'. starttime is field 22.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return proc{}, errors.New("bad stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return proc{}, errors.New("bad stat")
	}
	ppid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return proc{}, errors.New("bad stat")
	}
	return proc{pid: pid, ppid: ppid, state: f[0][0], start: start}, nil
}

// signalProc sends sig to p, and to no other process that got its pid
// after p exited: through a pidfd, opened on the pid and then checked to be
// p's by its start time. Without pidfds (Linux before 5.3), by kill(2).
func signalProc(p proc, sig syscall.Signal) error {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if errors.Is(err, syscall.ENOSYS) {
		return syscall.Kill(p.pid, sig)
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if now, err := readProc(p.pid); err != nil || now.start != p.start {
		return syscall.ESRCH
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}

// describe says, for the warning, which processes are left and why.
func describe(left []proc, failed map[int]error) string {
	var b strings.Builder
	for i, p := range left {
		if i == 8 {
			fmt.Fprintf(&b, ", ...")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "pid %d", p.pid)
		switch err := failed[p.pid]; {
		case err != nil:
			fmt.Fprintf(&b, ": %v", err)
		case p.state == 'D':
			b.WriteString(": in uninterruptible sleep")
		}
	}
	return b.String()
}
