package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// stepEnv names the events FIFO of a job step: the test binary, started
// with it set, is that step (stepMain) instead of the tests.
const stepEnv = "REDISLOCK_TEST_STEP"

// stepMain is a job step for the tests of the command's process handling.
// With --setpgid it first moves to a process group of its own, as Python's
// os.setpgid(0, 0) or a Go child started with Setpgid does. It writes
// "ready PID" to the events FIFO once its signals are set up and "term PID"
// on each SIGTERM, which it otherwise ignores: SIGKILL ends it, or SIGUSR1,
// on which it exits 0. With --respawn, each SIGTERM also starts a new step
// in a session of its own, which it does not wait for. A step gives up
// after two minutes, so that a failed test leaves nothing behind for long.
func stepMain(events string, args []string) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGUSR1)
	respawn := false
	for _, a := range args {
		switch a {
		case "--setpgid":
			if err := syscall.Setpgid(0, 0); err != nil {
				fmt.Fprintln(os.Stderr, "step:", err)
				return 1
			}
		case "--respawn":
			respawn = true
		}
	}
	report(events, "ready")
	giveUp := time.After(2 * time.Minute)
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGUSR1 {
				return 0
			}
			report(events, "term")
			if respawn {
				cmd := exec.Command(os.Args[0])
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
				if err := cmd.Start(); err != nil {
					fmt.Fprintln(os.Stderr, "step:", err)
				}
			}
		case <-giveUp:
			return 1
		}
	}
}

// report writes "what PID" to the events FIFO (a line, written at once).
func report(events, what string) {
	f, err := os.OpenFile(events, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "step:", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %d\n", what, os.Getpid())
}
