package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/semaphore"
)

// Semaphores whose prefix and name would spell one string, or whose names
// hold the escapes, braces and suffixes of the key layout, are separate
// semaphores of one slot each on a real redis-server: every one grants its
// slot while the others are held, and their keys never meet. Nor do they
// meet the lock and record of the same prefix and name.
func TestPrefixedKeysNeverMeet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	pairs := [][2]string{
		{"", "a:b:c"}, {"a:", "b:c"}, {"a:b:", "c"},
		{"p:", "s"}, {"p:", "s}"}, {"p:", "{s}"}, {"p:", "s}:holders"}, {"p:", "s}:fence"}, {"p:", "s}:wake"},
		{"p:", "x}"}, {"p:", "x%7D"}, {"p:", "x%"}, {"p:", "x%25"},
		{"p%", "s"}, {"p%7D", "s"}, // (a prefix with a brace is refused)
		{"", "\x00\xff"}, {"\x00", "\xff"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		s := newSem(t, rdb, p[1], 1, semaphore.WithPrefix(p[0]))
		for _, k := range semaphore.Keys(s) {
			other, dup := seen[k]
			require.False(t, dup, "%q is a key of (%q, %q) and of (%q, %q)", k, p[0], p[1], other[0], other[1])
			seen[k] = p
		}
		permit, err := s.TryAcquire(ctx, time.Minute)
		require.NoError(t, err, "prefix %q, name %q", p[0], p[1])
		t.Cleanup(func() { _ = permit.Release(context.Background()) })
		info, err := s.Inspect(ctx)
		require.NoError(t, err)
		assert.Len(t, info.Holders, 1, "prefix %q, name %q", p[0], p[1])
	}
	for _, p := range pairs {
		c := redislock.New(rdb, redislock.WithPrefix(p[0]))
		t.Cleanup(func() { _ = c.Close() })
		l, err := c.Obtain(ctx, p[1], time.Minute, redislock.WithFair(true))
		require.NoError(t, err, "the lock on prefix %q, name %q", p[0], p[1])
		t.Cleanup(func() { _ = l.Release(context.Background()) })
		require.NoError(t, c.Store().Put(ctx, p[1], []byte("v"), l.Fence(), time.Minute))
	}
	for _, p := range pairs {
		s := newSem(t, rdb, p[1], 1, semaphore.WithPrefix(p[0]))
		info, err := s.Inspect(ctx)
		require.NoError(t, err)
		assert.Len(t, info.Holders, 1, "prefix %q, name %q, beside its lock", p[0], p[1])
	}
}
