package stampede_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/leasetest"
	"github.com/redislock-go/redislock/stampede"
)

// meetingPairs are (prefix, key) pairs built to collide: each group's
// prefix and key, joined as they are or with '|' between them, spell one
// string.
var meetingPairs = [][][2]string{
	{{"", "stampede:user:1"}, {"stampede:", "user:1"}, {"stampede:user:", "1"}},
	{{"a|", "b"}, {"a", "|b"}, {"", "a||b"}},
	{{"%7C", "x"}, {"|", "x"}},
	{{"{t}", "1"}, {"{", "t}1"}},
}

// Groups whose prefix and key would spell one key each fill and cache
// their own value, in a Memory and on a real redis-server.
func TestPrefixedKeysNeverMeet(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		m := leasetest.NewMemory()
		pairsFillApart(t, m, m)
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		c := redislock.New(srv.Client(nil))
		t.Cleanup(func() { _ = c.Close() })
		pairsFillApart(t, c.Locker(), c.Store())
	})
}

func pairsFillApart(t *testing.T, locker lease.Locker, store lease.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	for _, group := range meetingPairs {
		for _, pair := range group {
			g, err := stampede.New(locker, store, stampede.WithPrefix(pair[0]))
			require.NoError(t, err)
			t.Cleanup(func() { _ = g.Close() })
			want := pair[0] + " / " + pair[1]
			got, err := g.Do(ctx, pair[1], time.Minute, func(context.Context) ([]byte, error) { return []byte(want), nil })
			require.NoError(t, err, "prefix %q, key %q", pair[0], pair[1])
			assert.Equal(t, want, string(got), "prefix %q, key %q: another Group's value", pair[0], pair[1])
		}
	}
}
