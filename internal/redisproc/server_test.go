package redisproc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestServer(t *testing.T) {
	t.Parallel()
	need(t, "redis-server")
	ctx := context.Background()
	s, err := Start(Config{})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Do(ctx, "SET", "k", "v")
	require.NoError(t, err)
	port, dir := s.Port(), s.Dir()

	s.Pause()
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = s.Do(short, "PING")
	cancel()
	require.Error(t, err, "PING to a paused server")
	if !strings.Contains(err.Error(), "timeout") {
		require.ErrorIs(t, err, context.DeadlineExceeded, "PING to a paused server: want a timeout")
	}
	s.Resume()
	v, err := s.Do(ctx, "GET", "k")
	require.NoError(t, err, "GET after resume")
	require.Equal(t, "v", v, "GET after resume")

	require.NoError(t, s.Restart())
	require.Equal(t, port, s.Port(), "restarted on another port")
	n, err := s.Do(ctx, "EXISTS", "k")
	require.NoError(t, err)
	require.Equal(t, int64(0), n, "EXISTS after a restart without persistence")

	s.Kill()
	require.False(t, s.Running(), "killed server still running")
	require.Zero(t, s.PID(), "killed server still running")
	require.Nil(t, s.Exited(), "killed server still running")
	require.NoError(t, s.Revive())
	require.True(t, s.Running(), "revived server not running")
	s.Close()
	require.NoDirExists(t, dir, "data directory left behind")
}

// A server that cannot start is an error quoting what it said.
func TestServerBadConfig(t *testing.T) {
	t.Parallel()
	need(t, "redis-server")
	_, err := Start(Config{Args: []string{"--no-such-option", "1"}})
	require.ErrorContains(t, err, "no-such-option", "Start with a bad option: want an error quoting it")
}

func TestLookPath(t *testing.T) {
	t.Parallel()
	_, err := LookPath("redis-no-such-binary")
	require.ErrorIs(t, err, ErrNotFound)
}

// A server started on a port another server took first (its port was
// free when picked, then a restarted server bound it) fails to bind and
// exits; start must say so, not take the other server's PONG for its own.
func TestStartOnTakenPort(t *testing.T) {
	t.Parallel()
	need(t, "redis-server")
	other, err := Start(Config{})
	require.NoError(t, err)
	defer other.Close()
	bin, err := LookPath("redis-server")
	require.NoError(t, err)
	s := &Server{cfg: Config{Bin: bin, Dir: t.TempDir(), LogLevel: DefaultLogLevel}}
	defer s.Kill()
	require.Error(t, s.start(other.Port(), 0), "start on a port another server holds succeeded")
	require.True(t, other.Running(), "the other server stopped")
}
