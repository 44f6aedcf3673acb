package script

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/keys"
)

// join.lua takes a free key for the grant and extends it where it holds
// the grant; it never takes a key another grant holds, never takes a key
// back after this grant's release there, and never lowers the node's last
// fence.
func TestJoinScript(t *testing.T) {
	t.Parallel()
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "join")
		join := func(token string, fence int64) JoinReply {
			t.Helper()
			r, err := Join(ctx, rdb, k.Boxed[:1], token, 10000, fence, "h")
			require.NoError(t, err)
			return r
		}
		get := func() string {
			t.Helper()
			v, err := rdb.Get(ctx, k.Lock).Result()
			require.NoError(t, err)
			return v
		}
		release := func(token string) {
			t.Helper()
			ok, err := Release(ctx, rdb, k.Boxed[:1], token, int64(60000), PublishNone, false)
			require.NoError(t, err)
			require.True(t, ok)
		}
		obtain := func(token string, proposal int64) ObtainReply {
			t.Helper()
			r, err := Obtain{Keys: k.Boxed[:1], Token: token, TTL: int64(10000), Proposal: proposal, Holder: ""}.Run(ctx, rdb)
			require.NoError(t, err)
			return r
		}

		// An absent key: taken, with the grant's fence.
		require.Equal(t, Joined, join("a", 500))
		require.Equal(t, "a:500::h;", get())
		pttl := rdb.PTTL(ctx, k.Lock).Val().Milliseconds()
		require.True(t, pttl > 6000 && pttl <= 10000, "PTTL %d", pttl)
		// Held by the grant: extended, unchanged.
		rdb.PExpire(ctx, k.Lock, 5*time.Second) // shorter than the join's, long enough to outlast a loaded machine
		require.Equal(t, Extended, join("a", 500))
		require.Greater(t, rdb.PTTL(ctx, k.Lock).Val().Milliseconds(), int64(6000))
		require.Equal(t, "a:500::h;", get())

		// Another grant's key is never taken.
		require.Equal(t, NotJoined, join("b", 900))
		require.Equal(t, "a:500::h;", get())

		// This grant's own released record is never taken back.
		release("a")
		record := get()
		require.Equal(t, NotJoined, join("a", 500))
		require.Equal(t, record, get())

		// Another grant's record with a lower fence (an earlier grant):
		// taken, with the grant's fence, the latest releases carried on.
		require.Equal(t, Joined, join("c", 800))
		require.Equal(t, "c:800: "+record[len("~:500: "):]+":h;", get())
		require.True(t, strings.HasPrefix(get(), "c:800: a:"), get())
		release("c")

		// A record with a higher fence (an attempt after the grant's):
		// taken, keeping the node's higher last fence; a proposal at or
		// below it is still refused.
		require.Equal(t, JoinedAbove, join("d", 600))
		require.True(t, strings.HasPrefix(get(), "d:800: c "), get())
		release("d")
		low := obtain("e", 800)
		require.Equal(t, LowProposal, low.Status)
		require.Equal(t, int64(800), low.Counter)
		require.Equal(t, Granted, obtain("e", 801).Status)

		// A record with the grant's own fence (a racing attempt proposed
		// it too): an attempt reached the node.
		rdb.Set(ctx, k.Lock, "~:900: zzzzzzzzzzzz", 0)
		require.Equal(t, JoinedAbove, join("y", 900))
		require.True(t, strings.HasPrefix(get(), "y:900: zzzzzzzzzzzz:"), get())

		// A value this version did not write counts as another holder's.
		rdb.Set(ctx, k.Lock, "~:x:", 0)
		require.Equal(t, NotJoined, join("f", 900))
		rdb.Set(ctx, k.Lock, "junk", 0)
		require.Equal(t, NotJoined, join("f", 900))
		require.Equal(t, "junk", get())

		// Fences beyond 2^53 are kept exactly.
		rdb.Del(ctx, k.Lock)
		const big = int64(1<<62 + 1)
		require.Equal(t, Joined, join("g", big))
		require.Equal(t, "g:"+strconv.FormatInt(big, 10)+"::h;", get())

		// Bad arguments are errors, and write nothing.
		rdb.Del(ctx, k.Lock)
		_, err := Join(ctx, rdb, k.Boxed[:1], "t", 0, 5, "")
		require.Error(t, err)
		_, err = Join(ctx, rdb, k.Boxed[:1], "t", 1000, 0, "")
		require.Error(t, err)
		_, err = Join(ctx, rdb, k.Boxed[:1], "t", 1000, -3, "")
		require.Error(t, err)
		require.Zero(t, rdb.Exists(ctx, k.Lock).Val())
	})
}
