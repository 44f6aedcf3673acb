// Package redistest starts real redis-server processes on free loopback ports
// for tests, and stops them when the test ends.
//
// When redis-server is not on PATH the tests that need it are skipped with a
// message, unless REDISLOCK_REQUIRE_REDIS=1 (set by .ci/run), which turns the
// skip into a failure.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RequireEnv is the environment variable that makes real-Redis tests mandatory.
const RequireEnv = "REDISLOCK_REQUIRE_REDIS"

// Binary returns the redis-server path, or skips (or fails, under RequireEnv) tb.
func Binary(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("redis-server not found on PATH and %s=1: %v", RequireEnv, err)
		}
		tb.Skip("redis-server not found on PATH; skipping real-Redis test (set " + RequireEnv + "=1 to make this a failure)")
	}
	return path
}

// Available reports whether redis-server is on PATH, for tests that also
// have something to check without it. Absent, it logs why (or, under
// RequireEnv, fails tb).
func Available(tb testing.TB) bool {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("redis-server not found on PATH and %s=1: %v", RequireEnv, err)
		}
		tb.Log("redis-server not found on PATH: running on miniredis only (set " + RequireEnv + "=1 to make this a failure)")
		return false
	}
	return true
}

// Server is one redis-server process owned by a test.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	args []string

	mu   sync.Mutex
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a redis-server with no persistence on a free loopback port.
// Extra arguments are passed as command-line config (e.g. "--appendonly",
// "yes"). The server is killed when the test ends.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: Binary(tb), dir: tb.TempDir(), args: args}
	if err := s.start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Kill)
	return s
}

// StartN starts n independent servers.
func StartN(tb testing.TB, n int, args ...string) []*Server {
	tb.Helper()
	srvs := make([]*Server, n)
	for i := range srvs {
		srvs[i] = Start(tb, args...)
	}
	return srvs
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start() error {
	var lastErr error
	for try := 0; try < 5; try++ {
		port := s.port
		if port == 0 || try > 0 {
			p, err := freePort()
			if err != nil {
				return err
			}
			port = p
		}
		args := append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", s.dir,
			"--daemonize", "no", "--loglevel", "warning",
			"--logfile", filepath.Join(s.dir, "redis.log"),
			"--repl-diskless-sync-delay", "0",
		}, s.args...)
		cmd := exec.Command(s.bin, args...)
		cmd.Dir = s.dir
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("redistest: start redis-server: %w", err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		if err := waitReady(port, done); err != nil {
			_ = cmd.Process.Kill()
			<-done
			lastErr = err // the port may have been taken meanwhile: try a fresh one
			continue
		}
		s.mu.Lock()
		s.port, s.cmd, s.done = port, cmd, done
		s.mu.Unlock()
		return nil
	}
	return fmt.Errorf("redistest: redis-server did not start: %w (log: %s)", lastErr, s.log())
}

func (s *Server) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	return strings.TrimSpace(string(b))
}

func waitReady(port int, done <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("redis-server on port %d exited", port)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("PING\r\n"))
			line, rerr := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if rerr == nil && strings.HasPrefix(line, "+PONG") {
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on port %d not ready after 10s", port)
}

// Addr is the server's current host:port.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// PID is the server process id.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// Client returns a go-redis client for the server, closed when the test ends.
// Options can be adjusted with fn (may be nil).
func (s *Server) Client(fn func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: s.Addr(), DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}
	if fn != nil {
		fn(o)
	}
	c := redis.NewClient(o)
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill stops the server with SIGKILL and waits for it to exit. Idempotent.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process must run to die cleanly
	_ = cmd.Process.Kill()
	<-done
}

// Restart kills the server and starts it again on the same port (with the
// same data directory, so a server with persistence reloads its data).
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		s.tb.Fatal(err)
	}
}

// Pause sends SIGSTOP: the server keeps its sockets but answers nothing.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume sends SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Do runs one command on a short-lived connection (for set-up and faults).
func (s *Server) Do(args ...any) (any, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Do(ctx, args...).Result()
}

// Revive starts a killed server again on the same port and data directory,
// returning an error instead of failing the test, so fault injectors running
// off the test goroutine can use it. A running server is left alone.
func (s *Server) Revive() error {
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		return nil
	}
	return s.start()
}

// Dir is the server's data directory (AOF and RDB files live there).
func (s *Server) Dir() string { return s.dir }
