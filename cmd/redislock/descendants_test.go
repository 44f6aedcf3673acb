//go:build linux

package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A step of the job that leaves the command's process group or session
// (coreutils timeout, setsid, a process calling setpgid, a daemon's double
// fork, and one that starts another such step when it gets SIGTERM) is
// stopped like the rest of the job, after the loss of the lock, after
// SIGTERM to redislock and when the command exits; until it is gone the
// lock stays held (a second run -n finds it held), and redislock exits only
// after every process of the job. The steps report on a FIFO, so the test
// waits for events.
func TestRunStopsEveryDescendant(t *testing.T) {
	srv, _, _ := server(t)
	escapes := []struct{ name, needs, script string }{
		{"timeout", "timeout", `timeout 60 "$STEP" & read x; exit 0`},
		{"setsid", "setsid", `setsid "$STEP" & read x; exit 0`},
		{"setpgid", "", `"$STEP" --setpgid & read x; exit 0`},
		{"double-fork", "setsid", `(setsid "$STEP" &); read x; exit 0`},
		{"respawn", "setsid", `(setsid "$STEP" --respawn &); read x; exit 0`},
	}
	for _, e := range escapes {
		t.Run(e.name, func(t *testing.T) {
			if e.needs != "" {
				if _, err := exec.LookPath(e.needs); err != nil {
					t.Skipf("%s is not installed", e.needs)
				}
			}
			for _, outcome := range []string{"exit", "sigterm", "loss"} {
				t.Run(outcome, func(t *testing.T) {
					runStep(t, srv.Do, srv.Addr(), e.name+"-"+outcome, e.script, outcome)
				})
			}
		})
	}
}

// runStep runs script under redislock run on key, brings about outcome
// (the command exits, redislock gets SIGTERM, the lock is lost) once the
// step is ready, and checks that the lock outlives the step and redislock
// the whole job.
func runStep(t *testing.T, do func(...any) (any, error), addr, key, script, outcome string) {
	self, err := os.Executable()
	require.NoError(t, err)
	events := filepath.Join(t.TempDir(), "events")
	require.NoError(t, syscall.Mkfifo(events, 0o600))
	f, err := os.OpenFile(events, os.O_RDWR, 0) // never at EOF, while the test reads it
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	ev := newLines(f)
	// In the environment of every process of the job.
	marker := stepEnv + "=" + events
	t.Cleanup(func() { // if the test failed, leave no process behind
		for _, pid := range survivors(marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	ttl, grace := "10s", "60s" // the step must be let go by the test
	if outcome == "loss" {
		ttl, grace = "1s", "300ms" // the step ignores SIGTERM: SIGKILL ends it
	}
	p := startEnv(t, []string{marker, "STEP=" + self}, "--addr", addr, "run", "--ttl", ttl, "--grace", grace, key, "--", "sh", "-c", script)
	pid := stepPID(t, ev.waitFor(t, "ready "))
	switch outcome {
	case "exit":
		require.NoError(t, p.stdin.Close()) // the shell's read returns: it exits 0
	case "sigterm":
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	case "loss":
		_, err := do("SET", "redislock:{"+key+"}", "thief:1", "PX", 60000)
		require.NoError(t, err)
	}
	ev.waitFor(t, "term "+strconv.Itoa(pid))
	steps := []int{pid}
	if strings.Contains(script, "--respawn") && outcome != "loss" {
		// The step started another one, to be let go too. (After a loss,
		// SIGKILL may end that one before it is ready: survivors sees it
		// if it lives.)
		steps = append(steps, stepPID(t, ev.waitFor(t, "ready ")))
	}
	if outcome != "loss" {
		code, _, stderr := result(t, "--addr", addr, "run", "-n", key, "--", "true")
		require.Equal(t, 75, code, "a second run -n while the step lives must find the lock held; stderr: %s", stderr)
		for _, pid := range steps {
			require.NoError(t, syscall.Kill(pid, syscall.SIGUSR1))
		}
	}
	code := p.wait()
	stderr := p.stderr.rest()
	want := map[string]int{"exit": 0, "sigterm": 128 + int(syscall.SIGTERM), "loss": 125}[outcome]
	assert.Equal(t, want, code, "stderr: %s", stderr)
	assert.Empty(t, survivors(marker), "processes of the job outlived redislock; stderr: %s", stderr)
	if outcome != "loss" {
		code, _, stderr := result(t, "--addr", addr, "run", "-n", key, "--", "true")
		assert.Equal(t, 0, code, "the lock is free once redislock exited; stderr: %s", stderr)
	}
}

func stepPID(t *testing.T, line string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.Fields(line)[1])
	require.NoError(t, err, line)
	return pid
}

// survivors returns the live processes whose environment holds marker.
func survivors(marker string) []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || dead(pid) {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+marker+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}
