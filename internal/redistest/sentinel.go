package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock/internal/redisproc"
	"github.com/stretchr/testify/require"
)

// Sentinel is a Sentinel deployment owned by a test (see
// redisproc.Sentinel): its servers are killed when the test ends, and
// their logs' tails logged first if the test failed.
type Sentinel struct {
	*redisproc.Sentinel
	tb testing.TB
}

// StartSentinel starts a primary, its replicas and sentinels of cfg (the
// zero value: one replica, three sentinels) and waits until they are
// healthy. Without redis-server the test is skipped (failed under
// RequireEnv).
func StartSentinel(tb testing.TB, cfg redisproc.SentinelConfig) *Sentinel {
	tb.Helper()
	cfg.Bin = Binary(tb)
	s, err := redisproc.StartSentinel(context.Background(), cfg)
	require.NoError(tb, err)
	closeAtEnd(tb, append(s.Servers(), s.Sentinels()...)...)
	return &Sentinel{Sentinel: s, tb: tb}
}

// Client returns a failover client of the primary, closed when the test
// ends. Options can be adjusted with fn (may be nil).
func (s *Sentinel) Client(fn func(*redis.FailoverOptions)) *redis.Client {
	c := s.Sentinel.Client(fn)
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
}
