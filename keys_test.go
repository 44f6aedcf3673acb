package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// Clients whose prefix and key would spell one string, or whose keys hold
// the escapes, braces and suffixes of the key layout, each get a lock and
// a record of their own on a real redis-server: every lock is granted
// while the others are held, each record reads back its own value, and
// Redis holds two keys per pair.
func TestPrefixedKeysNeverMeet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pairs := [][2]string{
		{"", "a:b:c"}, {"a:", "b:c"}, {"a:b:", "c"},
		{"p:", "k"}, {"p:", "k}"}, {"p:", "{k}"}, {"p:", "k}:rec"}, {"p:", "k}:queue"}, {"p:", "k}:wake"},
		{"p:", "x}"}, {"p:", "x%7D"}, {"p:", "x%"}, {"p:", "x%25"},
		{"p%", "k"}, {"p%7D", "k"}, // (a prefix with a brace is refused)
		{"", "\x00\xff"}, {"\x00", "\xff"},
	}
	for _, p := range pairs {
		c := redislock.New(rdb, redislock.WithPrefix(p[0]))
		t.Cleanup(func() { _ = c.Close() })
		l, err := c.Obtain(ctx, p[1], time.Minute)
		require.NoError(t, err, "prefix %q, key %q", p[0], p[1])
		require.NoError(t, c.Store().Put(ctx, p[1], []byte(p[0]+" / "+p[1]), l.Fence(), time.Minute))
		t.Cleanup(func() { _ = l.Release(context.Background()) })
	}
	for _, p := range pairs {
		c := redislock.New(rdb, redislock.WithPrefix(p[0]))
		t.Cleanup(func() { _ = c.Close() })
		rec, err := c.Store().Get(ctx, p[1])
		require.NoError(t, err, "prefix %q, key %q", p[0], p[1])
		assert.Equal(t, p[0]+" / "+p[1], string(rec.Value))
	}
	n, err := rdb.DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(2*len(pairs)), n, "Redis keys for %d locks with a record each", len(pairs))
}
