package lockbench

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// redisProc is one redis-server the tool started on a free loopback port.
type redisProc struct {
	Addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// spawnRedis starts n redis-server processes without persistence on free
// loopback ports. On error, the ones already started are stopped.
func spawnRedis(n int) ([]*redisProc, error) {
	bin, err := lookRedisServer()
	if err != nil {
		return nil, fmt.Errorf("lockbench: --spawn needs redis-server on PATH: %w", err)
	}
	var procs []*redisProc
	for range n {
		p, err := startRedis(bin)
		if err != nil {
			stopRedis(procs)
			return nil, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

func startRedis(bin string) (*redisProc, error) {
	dir, err := os.MkdirTemp("", "lockbench-redis-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 { // a free port may be taken before the server binds it
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		cmd := exec.Command(bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--daemonize", "no", "--loglevel", "warning",
			"--logfile", filepath.Join(dir, "redis.log"))
		cmd.Dir = dir
		cmd.SysProcAttr = sysProcAttr()
		if err := cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("lockbench: start redis-server: %w", err)
		}
		p := &redisProc{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(p.done) }()
		if lastErr = waitPong(p.Addr, p.done); lastErr == nil {
			return p, nil
		}
		p.stop(false)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
	os.RemoveAll(dir)
	return nil, fmt.Errorf("lockbench: redis-server did not start: %w (log: %s)", lastErr, strings.TrimSpace(string(log)))
}

func waitPong(addr string, done <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("redis-server on %s exited", addr)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
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
	return fmt.Errorf("redis-server on %s not ready after 10s", addr)
}

func (p *redisProc) stop(removeDir bool) {
	_ = p.cmd.Process.Kill()
	<-p.done
	if removeDir {
		os.RemoveAll(p.dir)
	}
}

func stopRedis(procs []*redisProc) {
	for _, p := range procs {
		p.stop(true)
	}
}

func lookRedisServer() (string, error) { return exec.LookPath("redis-server") }
