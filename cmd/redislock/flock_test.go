package main_test

import (
	"net"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// -w takes seconds or a duration, never a negative, infinite or too large
// one.
func TestRunWaitBadValues(t *testing.T) {
	srv, _, _ := server(t)
	for _, wait := range []string{"-1", "soon", "NaN", "Inf", "-2s", "1e300"} {
		if code, _, stderr := result(t, "--addr", srv.Addr(), "run", "-w", wait, "k", "--", "true"); code != 64 || !strings.Contains(stderr, "--wait") {
			t.Errorf("-w %s: exit %d, want 64 and a --wait message; stderr: %s", wait, code, stderr)
		}
	}
}

// -c COMMAND runs COMMAND through sh -c, after KEY as flock has it, or
// before KEY.
func TestRunCommandFlag(t *testing.T) {
	srv, _, _ := server(t)
	code, out, stderr := result(t, "--addr", srv.Addr(), "run", "job", "-c", `echo "$REDISLOCK_KEY ran by $0"; exit 3`)
	assert.False(t, code != 3 || strings.TrimSpace(out) != "job ran by sh", "run KEY -c: exit %d, stdout %q, stderr %s; want 3 and %q", code, out, stderr, "job ran by sh")
	code, out, stderr = result(t, "--addr", srv.Addr(), "run", "--command", "echo before", "job")
	assert.False(t, code != 0 || strings.TrimSpace(out) != "before", "run --command C KEY: exit %d, stdout %q, stderr %s", code, out, stderr)
	for _, args := range [][]string{
		{"job", "-c"},
		{"job", "-c", "true", "false"},
		{"-c", "true", "job", "--", "true"},
	} {
		if code, _, stderr := result(t, append([]string{"--addr", srv.Addr(), "run"}, args...)...); code != 64 || !strings.Contains(stderr, "-c") {
			t.Errorf("run %q: exit %d, stderr %s; want 64", args, code, stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "-V"} {
		code, out, stderr := result(t, arg)
		assert.False(t, code != 0 || !strings.HasPrefix(out, "redislock ") || !strings.Contains(out, runtime.Version()) || strings.Count(out, "\n") != 1, "%s: exit %d, stdout %q, stderr %q; want one line with the version and %s", arg, code, out, stderr, runtime.Version())
	}
}

// Built in a git checkout with -buildvcs, --version names the commit.
func TestVersionCommit(t *testing.T) {
	vbin := filepath.Join(t.TempDir(), "redislock")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", vbin, ".").CombinedOutput(); err != nil {
		t.Skipf("no build with -buildvcs=true here (no git checkout?): %v\n%s", err, out)
	}
	info, err := exec.Command("go", "version", "-m", vbin).Output()
	require.NoError(t, err)
	_, rev, ok := strings.Cut(string(info), "vcs.revision=")
	if !ok {
		t.Skip("the go command recorded no commit for this checkout")
	}
	rev, _, _ = strings.Cut(rev, "\n")
	out, err := exec.Command(vbin, "--version").Output()
	assert.False(t, err != nil || !strings.Contains(string(out), "commit "+rev), "--version: %q (%v); want commit %s", out, err, rev)
}

// A Redis that is down: exit 69 with one line, redislock's own (go-redis'
// log lines are dropped; with -v they are redislock's messages too).
func TestUnreachableOneLine(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	l.Close()
	for _, args := range [][]string{
		{"--addr", closed, "run", "k", "--", "true"},
		{"--addr", closed, "inspect", "k"},
	} {
		began := time.Now()
		code, _, stderr := result(t, args...)
		t.Logf("%v: exit %d after %v", args, code, time.Since(began).Round(time.Millisecond))
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		assert.False(t, code != 69 || len(lines) != 1 || !strings.HasPrefix(lines[0], "redislock: ") || strings.Contains(stderr, "redislock: redislock:"), "%v: exit %d, stderr:\n%s\nwant 69 and one line", args, code, stderr)
	}
	code, _, stderr := result(t, "--addr", closed, "run", "-v", "k", "--", "true")
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		assert.False(t, code != 69 || !strings.HasPrefix(line, "redislock: "), "-v: exit %d, a line not redislock's: %q", code, line)
	}
}

// The command's environment: redislock's own, less REDIS_URL (which may
// hold a password), plus the grant's variables.
func TestRunChildEnvNoCredentials(t *testing.T) {
	srv, _, _ := server(t)
	env := []string{"REDIS_URL=redis://default:s3cret@" + srv.Addr(), "JOB_SETTING=kept"}
	code, out, stderr := resultEnv(t, env, "run", "k", "--", "env")
	require.Equal(t, 0, code, "exit %d: %s", code, stderr)
	assert.False(t, strings.Contains(out, "s3cret") || strings.Contains(out, "REDIS_URL="), "the command's environment has the Redis URL:\n%s", out)
	for _, want := range []string{"JOB_SETTING=kept\n", "REDISLOCK_KEY=k\n", "REDISLOCK_FENCE=", "REDISLOCK_TOKEN="} {
		assert.True(t, strings.Contains(out, want), "the command's environment lacks %q:\n%s", want, out)
	}
}

// Under GODEBUG=fips140=only, where SHA-1 and MD5 panic, the command starts
// and works: --version, a job under a lock, one under a semaphore slot, and
// inspect (each a script of its own). It panicked at init before.
func TestFIPSOnly(t *testing.T) {
	srv, _, _ := server(t)
	fips := []string{"GODEBUG=fips140=only"}
	code, out, stderr := resultEnv(t, fips, "--version")
	require.Equal(t, 0, code, "--version: %s", stderr)
	require.True(t, strings.HasPrefix(out, "redislock "), "--version: %q", out)
	for _, args := range [][]string{
		{"run", "job", "--", "echo", "ran"},
		{"run", "--slots", "2", "transcoders", "--", "echo", "ran"},
	} {
		code, out, stderr = resultEnv(t, fips, append([]string{"--addr", srv.Addr()}, args...)...)
		require.Equal(t, 0, code, "%q: %s", args, stderr)
		require.Equal(t, "ran\n", out, "%q", args)
	}
	code, out, stderr = resultEnv(t, fips, "--addr", srv.Addr(), "inspect", "--json", "job")
	require.Equal(t, 0, code, "inspect: %s", stderr)
	require.Contains(t, out, `"held": false`)
}
