package redisproc

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestServer(t *testing.T) {
	t.Parallel()
	need(t, "redis-server")
	ctx := context.Background()
	s, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Do(ctx, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	port, dir := s.Port(), s.Dir()

	s.Pause()
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = s.Do(short, "PING")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("PING to a paused server = %v, want a timeout", err)
	}
	s.Resume()
	if v, err := s.Do(ctx, "GET", "k"); err != nil || v != "v" {
		t.Fatalf("GET after resume = %v, %v", v, err)
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Port() != port {
		t.Fatalf("restarted on port %d, want %d", s.Port(), port)
	}
	if n, err := s.Do(ctx, "EXISTS", "k"); err != nil || n != int64(0) {
		t.Fatalf("EXISTS after a restart without persistence = %v, %v", n, err)
	}

	s.Kill()
	if s.Running() || s.PID() != 0 || s.Exited() != nil {
		t.Fatal("killed server still running")
	}
	if err := s.Revive(); err != nil || !s.Running() {
		t.Fatalf("Revive = %v", err)
	}
	s.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("data directory left behind: %v", err)
	}
}

// A server that cannot start is an error quoting what it said.
func TestServerBadConfig(t *testing.T) {
	t.Parallel()
	need(t, "redis-server")
	_, err := Start(Config{Args: []string{"--no-such-option", "1"}})
	if err == nil || !strings.Contains(err.Error(), "no-such-option") {
		t.Fatalf("Start with a bad option = %v, want an error quoting it", err)
	}
}

func TestLookPath(t *testing.T) {
	t.Parallel()
	if _, err := LookPath("redis-no-such-binary"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("LookPath = %v, want ErrNotFound", err)
	}
}

// A server started on a port another server took first (its port was
// free when picked, then a restarted server bound it) fails to bind and
// exits; start must say so, not take the other server's PONG for its own.
func TestStartOnTakenPort(t *testing.T) {
	t.Parallel()
	need(t, "redis-server")
	other, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	bin, err := LookPath("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: Config{Bin: bin, Dir: t.TempDir(), LogLevel: DefaultLogLevel}}
	if err := s.start(other.Port(), 0); err == nil {
		s.Kill()
		t.Fatal("start on a port another server holds succeeded")
	}
	if !other.Running() {
		t.Fatal("the other server stopped")
	}
}
