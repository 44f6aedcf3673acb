package main_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/lifeline"
	"github.com/redislock-go/redislock/internal/redistest"
)

// bin is the redislock command, built once for the tests (with -race when
// the tests run with it).
var bin string

func TestMain(m *testing.M) {
	if events := os.Getenv(stepEnv); events != "" { // the test binary as a job's step
		os.Exit(stepMain(events, os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "redislock-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "redislock")
	args := []string{"build", "-o", bin}
	if raceBuild {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a redislock process started by a test.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *lines
	done   chan struct{}
	start  time.Time
}

// lines collects a stream line by line and lets a test wait for a line.
type lines struct {
	ch  chan string
	buf bytes.Buffer
}

func newLines(r io.Reader) *lines {
	l := &lines{ch: make(chan string, 256)}
	go func() { // ends at EOF, when the process exits
		s := bufio.NewScanner(r)
		for s.Scan() {
			l.ch <- s.Text()
		}
		close(l.ch)
	}()
	return l
}

// eventWait bounds a test's wait for an event (a line of output): long, so
// that a loaded machine never fails a test that waits for what will come.
const eventWait = time.Minute

// waitFor returns the first line that contains sub, failing after eventWait.
func (l *lines) waitFor(t *testing.T, sub string) string {
	t.Helper()
	timeout := time.After(eventWait)
	for {
		select {
		case line, ok := <-l.ch:
			require.True(t, ok, "stream ended before a line with %q; it had:\n%s", sub, l.buf.String())
			l.buf.WriteString(line + "\n")
			if strings.Contains(line, sub) {
				return line
			}
		case <-timeout:
			t.Fatalf("no line with %q after %v; got:\n%s", sub, eventWait, l.buf.String())
		}
	}
}

// rest drains the stream after the process exited.
func (l *lines) rest() string {
	for line := range l.ch {
		l.buf.WriteString(line + "\n")
	}
	return l.buf.String()
}

// start starts redislock with args, its stdin and stdout piped to the test.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	return startEnv(t, nil, args...)
}

// startEnv is start with env added to redislock's environment.
func startEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "REDIS_URL="), env...)
	cmd.WaitDelay = time.Second
	p := &proc{t: t, cmd: cmd, done: make(chan struct{})}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	p.stdout = bufio.NewReader(out)
	p.stderr = newLines(errPipe)
	p.start = time.Now()
	if err := lifeline.Start(cmd); err != nil { // dies with the test, however it ends
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		p.wait()
	})
	return p
}

// line reads one line of the command's stdout.
func (p *proc) line() string {
	p.t.Helper()
	got := make(chan string, 1)
	go func() { // ends when a line or EOF arrives
		s, _ := p.stdout.ReadString('\n')
		got <- strings.TrimSpace(s)
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(eventWait):
		p.t.Fatalf("no output line after %v", eventWait)
		return ""
	}
}

// wait waits for redislock to exit (at most 30 s) and returns its code.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	default:
	}
	exited := make(chan struct{})
	go func() { // ends when the process exits (WaitDelay: even if a leftover holds its pipes)
		_ = p.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-exited
		p.t.Errorf("redislock %v did not exit within 30s", p.cmd.Args[1:])
	}
	close(p.done)
	return p.cmd.ProcessState.ExitCode()
}

// result runs redislock with args to its end.
func result(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return resultEnv(t, nil, args...)
}

// resultEnv runs redislock with args to its end, with env added to its
// environment.
func resultEnv(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "REDIS_URL="), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := lifeline.Start(cmd); err != nil { // dies with the test, however it ends
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("redislock %v did not exit within 30s", args)
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}

// server starts a redis-server and returns it with a library client.
func server(t *testing.T) (*redistest.Server, *redislock.Client, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := redislock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	return srv, c, rdb
}

func inspect(t *testing.T, c *redislock.Client, key string) (held bool, holder string, fence int64) {
	t.Helper()
	info, err := c.Inspect(context.Background(), key)
	require.NoError(t, err)
	return info.Held, info.Holder, info.Fence
}

// dead reports whether pid has exited (gone, or a zombie).
func dead(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: comm may hold spaces, the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
