package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/redisproc"
)

// The libraries under a ClockServer, as Debian installs them (packages
// faketime and libtcmalloc-minimal4; .ci/run installs both).
var (
	fakeTimeLibs = []string{
		"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
		"/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
		"/usr/lib/faketime/libfaketime.so.1",
	}
	// libfaketime deadlocks a jemalloc-built redis-server at start
	// (wolfcw/libfaketime#130: its initialisation allocates while
	// jemalloc's, which reads the clock, holds jemalloc's init lock).
	// Preloaded first, tcmalloc serves those allocations instead; the
	// server is otherwise the same binary.
	mallocLibs = []string{
		"/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
		"/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4",
	}
)

func firstFile(paths []string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// ClockServer is a redis-server whose wall clock the test steps: the real
// binary under libfaketime, reading its offset from a file on every clock
// read. Only the wall clock is faked (TIME, key expiry); the server's
// monotonic clock runs true, as a real clock step leaves it.
type ClockServer struct {
	*Server
	file string

	mu     sync.Mutex
	offset time.Duration
}

// StartClock starts a redis-server under libfaketime with its clock at
// the true time, like Start (args are extra config). Without libfaketime
// or tcmalloc the test is skipped, or fails under RequireEnv.
func StartClock(tb testing.TB, args ...string) *ClockServer {
	tb.Helper()
	bin := Binary(tb)
	ft, ma := firstFile(fakeTimeLibs), firstFile(mallocLibs)
	if ft == "" || ma == "" {
		msg := "libfaketime or tcmalloc not installed (Debian: apt-get install faketime libtcmalloc-minimal4)"
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%s and %s=1", msg, RequireEnv)
		}
		tb.Skip(msg + "; skipping clock test")
	}
	dir := tb.TempDir()
	s := &ClockServer{file: filepath.Join(dir, "faketime")}
	require.NoError(tb, s.write(0))
	srv, err := redisproc.Start(redisproc.Config{Bin: bin, Dir: dir, Args: args, Env: []string{
		"LD_PRELOAD=" + ma + ":" + ft,
		"FAKETIME_TIMESTAMP_FILE=" + s.file,
		"FAKETIME_NO_CACHE=1",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}})
	require.NoError(tb, err)
	closeAtEnd(tb, srv)
	s.Server = &Server{Server: srv, tb: tb}
	return s
}

// Step moves the server's wall clock by d (back when negative), at once:
// the next clock read of the server sees it.
func (s *ClockServer) Step(d time.Duration) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NoError(s.tb, s.write(s.offset+d))
	s.offset += d
}

// Offset is how far the server's clock is from the true time.
func (s *ClockServer) Offset() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offset
}

// write replaces the offset file in one rename, so that the server never
// reads half of it.
func (s *ClockServer) write(off time.Duration) error {
	text := fmt.Sprintf("%+.6f\n", off.Seconds())
	if !strings.HasPrefix(text, "+") && !strings.HasPrefix(text, "-") {
		text = "+" + text
	}
	tmp := s.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.file)
}
