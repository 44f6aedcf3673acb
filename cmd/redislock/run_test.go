package main_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
)

func TestRunEnvAndSameLock(t *testing.T) {
	srv, c, rdb := server(t)
	p := start(t, "--addr", srv.Addr(), "run", "deploy", "--", "sh", "-c", `echo "$REDISLOCK_KEY|$REDISLOCK_FENCE|$REDISLOCK_TOKEN"; read x || true`)
	parts := strings.Split(p.line(), "|")
	require.Len(t, parts, 3, "child's environment: %q", parts)
	require.Equal(t, "deploy", parts[0], "child's environment: %q", parts)
	require.NotEqual(t, "", parts[2], "child's environment: %q", parts)
	fence, err := strconv.ParseInt(parts[1], 10, 64)
	require.NoError(t, err)
	// The same lock as the library's Obtain of the key, default prefix.
	ctx := context.Background()
	_, err = c.Obtain(ctx, "deploy", time.Second)
	require.ErrorIs(t, err, redislock.ErrNotObtained, "library Obtain while run holds the lock")
	v, err := rdb.Get(ctx, "redislock:{deploy}").Result()
	require.NoError(t, err, "lock key holds %q (), want the token and fence the child saw", v)
	require.True(t, strings.HasPrefix(v, parts[2]+":"+parts[1]), "lock key holds %q (%v), want the token and fence the child saw", v, err)
	held, holder, f := inspect(t, c, "deploy")
	host, _ := os.Hostname()
	require.True(t, held, "inspect: held %v holder %q fence %d; want host:pid of redislock and fence %d", held, holder, f, fence)
	require.Equal(t, fence, f, "inspect: held %v holder %q fence %d; want host:pid of redislock and fence %d", held, holder, f, fence)
	require.Equal(t, fmt.Sprintf("%s:%d", host, p.cmd.Process.Pid), holder, "inspect: held %v holder %q fence %d; want host:pid of redislock and fence %d", held, holder, f, fence)
	p.stdin.Close() // the child's read returns: it exits 0
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d, want 0; stderr: %s", code, p.stderr.rest())
	}
	if held, _, _ := inspect(t, c, "deploy"); held {
		t.Fatal("lock still held after run exited")
	}
}

func TestRunSerializes(t *testing.T) {
	srv, _, _ := server(t)
	log := filepath.Join(t.TempDir(), "log")
	script := `echo "start $REDISLOCK_FENCE" >> ` + log + `; echo started; read x; echo "end $REDISLOCK_FENCE" >> ` + log
	a := start(t, "--addr", srv.Addr(), "run", "job", "--", "sh", "-c", script)
	if got := a.line(); got != "started" {
		t.Fatalf("a: %q", got)
	}
	b := start(t, "--addr", srv.Addr(), "run", "-v", "job", "--", "sh", "-c", script)
	b.stderr.waitFor(t, "waiting for")
	a.stdin.Close()
	if code := a.wait(); code != 0 {
		t.Fatalf("a exited %d", code)
	}
	if got := b.line(); got != "started" {
		t.Fatalf("b: %q", got)
	}
	b.stdin.Close()
	if code := b.wait(); code != 0 {
		t.Fatalf("b exited %d", code)
	}
	out, err := os.ReadFile(log)
	require.NoError(t, err)
	var ev []string
	var fences []int64
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var what string
		var f int64
		fmt.Sscan(l, &what, &f)
		ev, fences = append(ev, what), append(fences, f)
	}
	require.Equal(t, "start,end,start,end", strings.Join(ev, ","), "the two runs overlapped or fences did not grow:\n%s", out)
	require.Equal(t, fences[1], fences[0], "the two runs overlapped or fences did not grow:\n%s", out)
	require.Equal(t, fences[3], fences[2], "the two runs overlapped or fences did not grow:\n%s", out)
	require.Greater(t, fences[2], fences[0], "the two runs overlapped or fences did not grow:\n%s", out)
}

func TestRunLossKillsProcessGroup(t *testing.T) {
	srv, _, _ := server(t)
	const ttl, grace = 600 * time.Millisecond, 300 * time.Millisecond
	// Both the shell and its grandchild ignore SIGTERM: only SIGKILL ends them.
	p := start(t, "--addr", srv.Addr(), "run", "--ttl", ttl.String(), "--grace", grace.String(), "stolen", "--",
		"sh", "-c", `trap "" TERM; sleep 1000 & echo $$ $!; wait; wait`)
	var shell, grandchild int
	_, err := fmt.Sscan(p.line(), &shell, &grandchild)
	require.NoError(t, err)
	t.Cleanup(func() { // if the test failed, leave no process behind
		_ = syscall.Kill(shell, syscall.SIGKILL)
		_ = syscall.Kill(grandchild, syscall.SIGKILL)
	})
	// Another party takes the lock (an operator's DEL, a failover that lost it).
	stolen := time.Now()
	_, err = srv.Do("SET", "redislock:{stolen}", "thief:1", "PX", 60000)
	require.NoError(t, err)
	code := p.wait()
	took := time.Since(stolen)
	stderr := p.stderr.rest()
	require.Equal(t, 125, code, "exit %d, want 125 (lock lost); stderr: %s", code, stderr)
	require.True(t, dead(shell), "after the loss: shell dead %v, grandchild dead %v", dead(shell), dead(grandchild))
	require.True(t, dead(grandchild), "after the loss: shell dead %v, grandchild dead %v", dead(shell), dead(grandchild))
	m := regexp.MustCompile(`stopped (\S+) after the loss`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no stop time reported: %s", stderr)
	}
	stop, _ := time.ParseDuration(m[1])
	t.Logf("lock stolen -> redislock exited: %v (renewal every %v finds the loss); loss -> job gone: %v (grace %v, target grace+100ms)", took, ttl/3, stop, grace)
	assert.LessOrEqual(t, stop, time.Duration(grace+2*time.Second), "the process group took %v after the loss to stop (grace %v)", stop, grace)
	if v, _ := srv.Do("GET", "redislock:{stolen}"); v != "thief:1" {
		t.Errorf("the new holder's lock was touched: %v", v)
	}
}

func TestRunExitCodes(t *testing.T) {
	srv, c, _ := server(t)
	addr := srv.Addr()
	for _, tc := range []struct {
		argv []string
		want int
	}{
		{[]string{"true"}, 0},
		{[]string{"sh", "-c", "exit 42"}, 42},
		{[]string{"sh", "-c", "kill -9 $$"}, 128 + 9},
		{[]string{"no-such-command-xyz"}, 127},
		{[]string{"/dev/null"}, 126},
	} {
		code, _, stderr := result(t, append([]string{"--addr", addr, "run", "k", "--"}, tc.argv...)...)
		assert.Equal(t, tc.want, code, "%v: exit %d, want %d; stderr: %s", tc.argv, code, tc.want, stderr)
		if held, _, _ := inspect(t, c, "k"); held {
			t.Fatalf("%v: lock still held after exit", tc.argv)
		}
	}
}

func TestRunSIGTERM(t *testing.T) {
	srv, c, _ := server(t)
	p := start(t, "--addr", srv.Addr(), "run", "--grace", "5s", "svc", "--", "sh", "-c", `echo $$; exec sleep 1000`)
	pid, err := strconv.Atoi(p.line())
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if held, _, _ := inspect(t, c, "svc"); !held {
		t.Fatal("not held while the command runs")
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	if code := p.wait(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want %d (the command, killed by the forwarded SIGTERM); stderr: %s", code, 128+int(syscall.SIGTERM), p.stderr.rest())
	}
	require.True(t, dead(pid), "the command survived SIGTERM to redislock")
	if held, _, _ := inspect(t, c, "svc"); held {
		t.Fatal("lock still held after SIGTERM")
	}
}

// The waits are over a second: a wait bounds the connection too, and on a
// loaded machine one of 100-200 ms ran out before the server's first reply
// (exit 69, not the timeout's 124). The cases run one after the other:
// twelve -race processes at once are load enough to time out a read.
func TestRunConflictAndTimeout(t *testing.T) {
	srv, c, _ := server(t)
	ctx := context.Background()
	l, err := c.Obtain(ctx, "busy", time.Minute, redislock.WithHolder("other-host:1"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Release(ctx) })
	marker := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct {
		flags []string
		want  int
	}{
		{[]string{"--nonblock"}, 75},
		{[]string{"--nonblock", "--conflict-exit-code", "3"}, 3},
		{[]string{"--nonblock", "--conflict-exit-code", "0"}, 0},
		{[]string{"--wait", "1s"}, 124},
		// As flock(1) users type them: -n, -w in seconds (fractions
		// allowed) or as a duration, -E (of --nonblock and, when given,
		// of --wait).
		{[]string{"-n"}, 75},
		{[]string{"-n", "-E", "3"}, 3},
		{[]string{"-nE", "0"}, 0},
		{[]string{"-w", "1.2"}, 124},
		{[]string{"-w", "0"}, 124}, // one attempt
		{[]string{"--wait=1.1"}, 124},
		{[]string{"-w", "1100ms"}, 124},
		{[]string{"-w", "1.2", "-E", "9"}, 9},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			began := time.Now()
			code, _, stderr := result(t, append(append([]string{"--addr", srv.Addr(), "run"}, tc.flags...), "busy", "--", "touch", marker)...)
			t.Logf("exit %d after %v", code, time.Since(began).Round(time.Millisecond))
			assert.Equal(t, tc.want, code, "stderr: %s", stderr)
			if tc.want != 0 {
				assert.Contains(t, stderr, "other-host:1", "stderr names the holder")
			}
			require.NoFileExists(t, marker, "the command ran although the lock was held")
		})
	}
}

func TestRunBadInput(t *testing.T) {
	srv, _, _ := server(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		args []string
		want int
		say  string
	}{
		{[]string{"--addr", closed, "run", "k", "--", "true"}, 69, "connection refused"},
		{[]string{"--addr", srv.Addr(), "run", "--bogus", "k", "--", "true"}, 64, "unknown flag"},
		{[]string{"--addr", srv.Addr(), "run", "k"}, 64, "no COMMAND"},
		{[]string{"--addr", srv.Addr(), "run"}, 64, "needs a KEY"},
		{[]string{"--addr", srv.Addr(), "run", "--ttl", "0s", "k", "--", "true"}, 64, "TTL"},
		{[]string{"--addr", srv.Addr(), "run", "--nonblock", "--wait", "1s", "k", "--", "true"}, 64, "exclude"},
		{[]string{"--addr", srv.Addr(), "run", "--conflict-exit-code", "300", "k", "--", "true"}, 64, "0-255"},
		{[]string{"--addr", "not an address", "run", "k", "--", "true"}, 64, "host:port"},
		{[]string{"--addr", srv.Addr(), "nosuchcommand"}, 64, "unknown command"},
	} {
		code, _, stderr := result(t, tc.args...)
		assert.False(t, code != tc.want || !strings.Contains(stderr, tc.say), "%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.want, tc.say)
	}
}

// Redis stops answering (SIGSTOP): no renewal gets through, the lease ends,
// and the command is stopped as for a stolen lock.
func TestRunLossRedisPaused(t *testing.T) {
	srv, _, _ := server(t)
	const ttl, grace = 600 * time.Millisecond, 200 * time.Millisecond
	p := start(t, "--addr", srv.Addr(), "run", "--ttl", ttl.String(), "--grace", grace.String(), "paused", "--",
		"sh", "-c", `echo $$; exec sleep 1000`)
	pid, err := strconv.Atoi(p.line())
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	paused := time.Now()
	srv.Pause()
	defer srv.Resume()
	code := p.wait()
	stderr := p.stderr.rest()
	require.Equal(t, 125, code, "exit %d, command dead %v; want 125 and dead; stderr: %s", code, dead(pid), stderr)
	require.True(t, dead(pid), "exit %d, command dead %v; want 125 and dead; stderr: %s", code, dead(pid), stderr)
	t.Logf("Redis paused -> redislock exited: %v (ttl %v, grace %v)\n%s", time.Since(paused).Round(time.Millisecond), ttl, grace, stderr)
}
