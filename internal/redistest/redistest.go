// Package redistest starts real redis-server processes on free loopback
// ports for tests (a plain server, a Redis Cluster, a Sentinel deployment)
// and stops them when the test ends; when a test fails, it logs the tail
// of each server's log. The processes are run by internal/redisproc.
//
// When redis-server (or, for a Cluster, redis-cli) is not on PATH the
// tests that need it are skipped with a message, unless
// REDISLOCK_REQUIRE_REDIS=1 (set by .ci/run), which turns the skip into a
// failure.
package redistest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock/internal/redisproc"
	"github.com/stretchr/testify/require"
)

// RequireEnv is the environment variable that makes real-Redis tests mandatory.
const RequireEnv = "REDISLOCK_REQUIRE_REDIS"

// Binary returns the redis-server path, or skips (or fails, under RequireEnv) tb.
func Binary(tb testing.TB) string {
	tb.Helper()
	return need(tb, "redis-server")
}

// CLI returns the redis-cli path, or skips (or fails, under RequireEnv) tb.
func CLI(tb testing.TB) string {
	tb.Helper()
	return need(tb, "redis-cli")
}

func need(tb testing.TB, name string) string {
	tb.Helper()
	path, err := redisproc.LookPath(name)
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%s not found on PATH and %s=1: %v", name, RequireEnv, err)
		}
		tb.Skip(name + " not found on PATH; skipping real-Redis test (set " + RequireEnv + "=1 to make this a failure)")
	}
	return path
}

// Available reports whether redis-server is on PATH, for tests that also
// have something to check without it. Absent, it logs why (or, under
// RequireEnv, fails tb).
func Available(tb testing.TB) bool {
	tb.Helper()
	if _, err := redisproc.LookPath("redis-server"); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("redis-server not found on PATH and %s=1: %v", RequireEnv, err)
		}
		tb.Log("redis-server not found on PATH: running on miniredis only (set " + RequireEnv + "=1 to make this a failure)")
		return false
	}
	return true
}

// Server is one redis-server process owned by a test: a redisproc.Server
// whose Restart fails the test, whose Do needs no context, and whose
// clients are closed when the test ends.
type Server struct {
	*redisproc.Server
	tb testing.TB
}

// Start starts a redis-server with no persistence on a free loopback port.
// Extra arguments are passed as command-line config (e.g. "--appendonly",
// "yes"). The server is killed when the test ends.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	srv, err := redisproc.Start(redisproc.Config{Bin: Binary(tb), Dir: tb.TempDir(), Args: args})
	require.NoError(tb, err)
	closeAtEnd(tb, srv)
	return &Server{Server: srv, tb: tb}
}

// closeAtEnd closes the servers when tb ends, logging their logs' tails
// first if tb failed.
func closeAtEnd(tb testing.TB, srvs ...*redisproc.Server) {
	tb.Cleanup(func() {
		for _, s := range srvs {
			if tb.Failed() {
				tb.Logf("log of redis-server %s:\n%s", s.Addr(), s.Log())
			}
			s.Close()
		}
	})
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

// Client returns a go-redis client for the server, closed when the test ends.
// Options can be adjusted with fn (may be nil).
func (s *Server) Client(fn func(*redis.Options)) *redis.Client {
	o := s.Options()
	if fn != nil {
		fn(o)
	}
	c := redis.NewClient(o)
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Restart kills the server and starts it again on the same port (with the
// same data directory, so a server with persistence reloads its data). It
// fails the test if the server does not come back.
func (s *Server) Restart() {
	s.tb.Helper()
	require.NoError(s.tb, s.Server.Restart())
}

// Do runs one command on the server's admin connection (for set-up and
// faults), bounded by 5 s.
func (s *Server) Do(args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Server.Do(ctx, args...)
}
