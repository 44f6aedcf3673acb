package redisproc

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/testkit"
)

// The deployment is formed, a failover promotes the replica (which had the
// key), the old primary follows it, and a failover client finds the new
// primary.
func TestSentinel(t *testing.T) {
	t.Parallel()
	testkit.SkipShort(t)
	need(t, "redis-server")
	ctx := testkit.Context(t)
	s, err := StartSentinel(ctx, SentinelConfig{})
	require.NoError(t, err)
	defer s.Close()
	old, err := s.Primary(ctx)
	require.NoError(t, err)
	require.Same(t, s.Servers()[0], old, "primary")
	rdb := s.Client(nil)
	defer rdb.Close()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, poll(ctx, "replica has the key", func(ctx context.Context) (bool, string) {
		return inSync(ctx, s.Servers()[1], old) == "", "replica behind"
	}))
	p, err := s.Failover(ctx)
	require.NoError(t, err)
	require.NotSame(t, old, p, "the old primary is the new one")
	require.Same(t, s.Servers()[1], p, "new primary %s, old %s", p.Addr(), old.Addr())
	// The client learns of the switch from the sentinels; a write may hit
	// the old primary (READONLY) until then, which go-redis retries.
	require.NoError(t, poll(ctx, "write through the failover client", func(ctx context.Context) (bool, string) {
		err := rdb.Set(ctx, "k2", "v2", 0).Err()
		return err == nil, "SET: " + errString(err)
	}))
	v, err := p.Do(ctx, "GET", "k")
	require.NoError(t, err, "GET on the new primary")
	require.Equal(t, "v", v, "GET on the new primary")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
