package dedup_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/dedup"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/leasetest"
)

// meetingPairs are (prefix, id) pairs built to collide: each group's
// prefix and id, joined as they are or with '|' between them, spell one
// string.
var meetingPairs = [][][2]string{
	{{"", "dedup:email:1"}, {"dedup:", "email:1"}, {"dedup:email:", "1"}},
	{{"a|", "b"}, {"a", "|b"}, {"", "a||b"}},
	{{"%7C", "x"}, {"|", "x"}},
	{{"{t}", "1"}, {"{", "t}1"}},
}

// Groups whose prefix and id would spell one key each run their own job
// and get their own value, in a Memory and on a real redis-server.
func TestPrefixedKeysNeverMeet(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		m := leasetest.NewMemory()
		pairsRunApart(t, m, m)
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		rdb := srv.Client(nil)
		c := redislock.New(rdb)
		t.Cleanup(func() { _ = c.Close() })
		pairsRunApart(t, c.Locker(), c.Store())
	})
}

func pairsRunApart(t *testing.T, locker lease.Locker, store lease.Store) {
	ctx := ctxFor(t)
	for _, group := range meetingPairs {
		for _, pair := range group {
			g, err := dedup.New(locker, store, dedup.WithPrefix(pair[0]))
			require.NoError(t, err)
			want := pair[0] + " / " + pair[1]
			res, err := g.Do(ctx, pair[1], func(context.Context, int64) ([]byte, error) { return []byte(want), nil })
			require.NoError(t, err, "prefix %q, id %q", pair[0], pair[1])
			assert.True(t, res.Ran, "prefix %q, id %q: another Group's job answered", pair[0], pair[1])
			assert.Equal(t, want, string(res.Value), "prefix %q, id %q", pair[0], pair[1])
		}
	}
}
