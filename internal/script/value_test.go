package script

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/keys"
)

// ParseValue reads what the scripts write: a grant with its holder, its
// waiters' mark, a released record with the latest releases; and refuses
// what they do not.
func TestParseValue(t *testing.T) {
	t.Parallel()
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "value")
		get := func() Value {
			t.Helper()
			v, ok := ParseValue(rdb.Get(ctx, k.Lock).Val())
			require.True(t, ok, "the scripts' value %q", rdb.Get(ctx, k.Lock).Val())
			return v
		}
		a, err := Obtain{Keys: k.Boxed[:1], Token: "tokenAAAAAAAAAAAA", TTL: 10000, Holder: "me"}.Run(ctx, rdb)
		require.NoError(t, err)
		assert.Equal(t, Value{Token: "tokenAAAAAAAAAAAA", Fence: a.Fence, Holder: "me"}, get())
		held, err := Obtain{Keys: k.Boxed[:1], Token: "tokenBBBBBBBBBBBB", TTL: 10000}.Run(ctx, rdb)
		require.NoError(t, err)
		require.Equal(t, Held, held.Status)
		assert.True(t, get().Marked, "an attempt that found it held marks it")
		released, err := Release(ctx, rdb, k.Boxed[:1], "tokenAAAAAAAAAAAA", 5000, PublishNone, false)
		require.NoError(t, err)
		require.True(t, released)
		assert.Equal(t, Value{Fence: a.Fence, Releases: []string{"tokenAAAAAAA"}, Released: true}, get())
		b, err := Obtain{Keys: k.Boxed[:1], Token: "tokenBBBBBBBBBBBB", TTL: 10000}.Run(ctx, rdb)
		require.NoError(t, err)
		assert.Equal(t, Value{Token: "tokenBBBBBBBBBBBB", Fence: b.Fence, Releases: []string{"tokenAAAAAAA"}}, get())
	})
	for _, v := range []string{"", "x", "tok:12", "tok:x:", ":12::;", "tok:012::;", "tok:-1::;", "tok:12::",
		"tok:12::h", "tok:9223372036854775808::;", "~:12::h;", "~:0:"} {
		_, ok := ParseValue(v)
		assert.False(t, ok, "%q is no value of the scripts'", v)
	}
}
