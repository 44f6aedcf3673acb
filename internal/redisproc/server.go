package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/lifeline"
)

// Defaults, all in one place.
const (
	// ReadyTimeout bounds the wait for a started server to answer PING.
	ReadyTimeout = 10 * time.Second
	// DefaultLogLevel is the servers' log level unless Config says.
	DefaultLogLevel = "warning"
	// logTail is how much of a server's log an error quotes.
	logTail = 2048
	// pollEvery is the period of every bounded poll of a server's state.
	pollEvery = 10 * time.Millisecond
	// startTries is how often Start picks a fresh port when the one it
	// picked was taken before the server bound it.
	startTries = 5
)

// ErrNotFound means redis-server (or redis-cli) is not on PATH.
var ErrNotFound = errors.New("redisproc: not found on PATH")

// LookPath returns the path of a Redis binary ("redis-server",
// "redis-cli"), or an error matching ErrNotFound.
func LookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrNotFound, name, err)
	}
	return p, nil
}

// Config describes one server. The zero Config is a plain server without
// persistence.
type Config struct {
	// Bin is the redis-server binary; "" looks it up on PATH.
	Bin string
	// Dir is the data directory (RDB, AOF, nodes.conf, the log); "" makes
	// a temporary one, which Close removes.
	Dir string
	// File, when not empty, is written to Dir/redis.conf and given to the
	// server as its config file, before any argument. A Sentinel needs one
	// (it rewrites it).
	File string
	// Sentinel runs the server as a Sentinel (--sentinel).
	Sentinel bool
	// ClusterBus picks a second free port for the cluster bus
	// (--cluster-port), kept across restarts; for --cluster-enabled yes.
	ClusterBus bool
	// LogLevel is the server's log level; default DefaultLogLevel.
	LogLevel string
	// Args are command-line config after the defaults (e.g. "--appendonly",
	// "yes"); a later argument wins over a default.
	Args []string
	// Env is added to the environment the server inherits ("K=V"), for
	// example an LD_PRELOAD that fakes its clock (redistest.StartClock).
	Env []string
}

// Server is one redis-server process on a loopback port. Its methods are
// safe for concurrent use.
type Server struct {
	cfg    Config
	ownDir bool

	mu    sync.Mutex
	port  int
	bus   int // cluster bus port, 0 without Config.ClusterBus
	cmd   *exec.Cmd
	done  chan struct{} // closed when cmd has exited
	admin *redis.Client // for Do; reconnects after a restart
}

// Start starts a server on a free loopback port and waits until it answers
// PING (at most ReadyTimeout). The error of a server that did not start
// quotes its log.
func Start(cfg Config) (*Server, error) {
	if cfg.Bin == "" {
		bin, err := LookPath("redis-server")
		if err != nil {
			return nil, err
		}
		cfg.Bin = bin
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = DefaultLogLevel
	}
	s := &Server{cfg: cfg}
	if s.cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "redisproc-")
		if err != nil {
			return nil, fmt.Errorf("redisproc: %w", err)
		}
		s.cfg.Dir, s.ownDir = dir, true
	}
	if cfg.File != "" {
		if err := os.WriteFile(s.confPath(), []byte(cfg.File), 0o644); err != nil {
			s.removeDir()
			return nil, fmt.Errorf("redisproc: %w", err)
		}
	}
	var lastErr error
	for range startTries {
		port, bus, err := s.freePorts()
		if err != nil {
			s.removeDir()
			return nil, err
		}
		if lastErr = s.start(port, bus); lastErr == nil {
			return s, nil
		}
		// The port may have been taken meanwhile: try fresh ones.
	}
	err := fmt.Errorf("redisproc: redis-server did not start: %w (log: %s)", lastErr, s.Log())
	s.removeDir()
	return nil, err
}

// handedOut holds every port this process gave a server: a port is never
// given twice, so that a server killed by one test cannot come back as
// another test's server on the same port, answering the first test's
// clients in its place.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

func (s *Server) freePorts() (port, bus int, err error) {
	n := 1
	if s.cfg.ClusterBus {
		n = 2
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = make(map[int]bool)
	}
	var ports []int
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, fmt.Errorf("redisproc: no free port: %w", err)
		}
		ls = append(ls, l) // held open until the end: never picked twice here
		if p := l.Addr().(*net.TCPAddr).Port; !handedOut.ports[p] {
			handedOut.ports[p] = true
			ports = append(ports, p)
		}
	}
	if n == 2 {
		bus = ports[1]
	}
	return ports[0], bus, nil
}

func (s *Server) confPath() string { return filepath.Join(s.cfg.Dir, "redis.conf") }
func (s *Server) logPath() string  { return filepath.Join(s.cfg.Dir, "redis.log") }
func (s *Server) outPath() string  { return filepath.Join(s.cfg.Dir, "stdout.log") }

func (s *Server) args(port, bus int) []string {
	var args []string
	if s.cfg.File != "" {
		args = append(args, s.confPath())
	}
	if s.cfg.Sentinel {
		args = append(args, "--sentinel")
	}
	args = append(args,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", s.cfg.Dir, "--daemonize", "no",
		"--loglevel", s.cfg.LogLevel, "--logfile", s.logPath())
	if !s.cfg.Sentinel {
		args = append(args, "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0")
	}
	if bus != 0 {
		args = append(args, "--cluster-port", strconv.Itoa(bus))
	}
	return append(args, s.cfg.Args...)
}

// start runs the server on port and waits until it answers PING.
func (s *Server) start(port, bus int) error {
	out, err := os.Create(s.outPath()) // what the server says before its log is open
	if err != nil {
		return fmt.Errorf("redisproc: %w", err)
	}
	defer out.Close() // the child has its own descriptor
	cmd := exec.Command(s.cfg.Bin, s.args(port, bus)...)
	cmd.Dir = s.cfg.Dir
	if len(s.cfg.Env) > 0 {
		cmd.Env = append(os.Environ(), s.cfg.Env...)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := lifeline.Start(cmd); err != nil {
		return fmt.Errorf("redisproc: start %s: %w", s.cfg.Bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitReady(addr, cmd.Process.Pid, done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return err
	}
	s.mu.Lock()
	s.port, s.bus, s.cmd, s.done = port, bus, cmd, done
	s.mu.Unlock()
	return nil
}

// waitReady polls addr until the server there answers as process pid (INFO
// server's process_id), the process exits (done) or ReadyTimeout passes.
// A PONG alone is not enough: when the port was free when picked but
// another test's server, restarted on it, took it first, ours fails to
// bind and that other server answers.
func waitReady(addr string, pid int, done <-chan struct{}) error {
	deadline := time.Now().Add(ReadyTimeout)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	want := "process_id:" + strconv.Itoa(pid) + "\r\n"
	for {
		if info, err := infoServer(addr); err == nil {
			if strings.Contains(info, want) && pong(addr) {
				return nil // ours, and done loading its data (PING answers LOADING until then)
			}
			if !strings.Contains(info, want) && strings.Contains(info, "process_id:") {
				// Someone else's server: ours will exit on its failed bind.
				select {
				case <-done:
					return fmt.Errorf("redis-server on %s exited: the port is another server's", addr)
				case <-time.After(ReadyTimeout):
					return fmt.Errorf("redis-server on %s: another server answers there", addr)
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s not ready after %v", addr, ReadyTimeout)
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server on %s exited", addr)
		case <-tick.C:
		}
	}
}

// pong reports whether addr answers PING with PONG.
func pong(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// infoServer reads INFO server from addr on a connection of its own.
func infoServer(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("INFO server\r\n")); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(head, "$") {
		return "", fmt.Errorf("INFO server: %q", strings.TrimSpace(head)) // -LOADING and the like
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		return "", err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	return string(body), nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Port is the server's port.
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// BusPort is the server's cluster bus port (0 without Config.ClusterBus).
func (s *Server) BusPort() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bus
}

// PID is the server's process id; 0 while it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Running reports whether the server process runs (it may be paused).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Dir is the server's data directory.
func (s *Server) Dir() string { return s.cfg.Dir }

// Log returns the tail of the server's log, after what it wrote to stdout
// and stderr (a configuration error, before the log file is open).
func (s *Server) Log() string {
	out, _ := os.ReadFile(s.outPath())
	return strings.TrimSpace(tail(out) + "\n" + tail(s.readLog()))
}

func (s *Server) readLog() []byte {
	b, _ := os.ReadFile(s.logPath())
	return b
}

func tail(b []byte) string {
	if len(b) > logTail {
		b = b[len(b)-logTail:]
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimSpace(string(b))
}

// Options returns go-redis options for a client of the server, with
// one-second dial, read and write timeouts.
func (s *Server) Options() *redis.Options {
	return &redis.Options{Addr: s.Addr(), DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}
}

// Do runs one command on the server's admin connection, bounded by ctx
// (the connection honours context deadlines), without retries.
func (s *Server) Do(ctx context.Context, args ...any) (any, error) {
	s.mu.Lock()
	if s.admin == nil {
		s.admin = redis.NewClient(&redis.Options{
			Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), MaxRetries: -1, PoolSize: 2,
			DialTimeout: time.Second, ReadTimeout: 2 * time.Second, ContextTimeoutEnabled: true,
		})
	}
	admin := s.admin
	s.mu.Unlock()
	return admin.Do(ctx, args...).Result()
}

// Kill stops the server with SIGKILL (resuming a paused one first) and
// waits for it to exit. It does nothing if the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done, admin := s.cmd, s.done, s.admin
	s.cmd, s.admin = nil, nil // the admin connection died with the server
	s.mu.Unlock()
	if admin != nil {
		_ = admin.Close()
	}
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process must run to die
	_ = cmd.Process.Kill()
	<-done
}

// Exited returns a channel closed when the current process exits (nil
// while the server is not running).
func (s *Server) Exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	return s.done
}

// Restart kills the server and starts it again on the same port (and
// cluster bus port) with the same data directory, so a server with
// persistence reloads its data and a cluster node its nodes.conf.
func (s *Server) Restart() error {
	s.Kill()
	return s.Revive()
}

// Revive starts a killed server again on the same port and data directory.
// A running server is left alone.
func (s *Server) Revive() error {
	s.mu.Lock()
	running, port, bus := s.cmd != nil, s.port, s.bus
	s.mu.Unlock()
	if running {
		return nil
	}
	if err := s.start(port, bus); err != nil {
		return fmt.Errorf("redisproc: restart on port %d: %w (log: %s)", port, err, s.Log())
	}
	return nil
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

// Close kills the server and removes its data directory if Start made it.
// Idempotent.
func (s *Server) Close() {
	s.Kill()
	s.removeDir()
}

func (s *Server) removeDir() {
	if s.ownDir {
		_ = os.RemoveAll(s.cfg.Dir)
	}
}
