package script

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// multi_obtain.lua and multi_release.lua keep the single-key format: the
// next fence continues from each key's released record, a replay of a
// release answers released, also after a later grant, and each released
// key is one record with the given TTL.
func TestMultiScripts(t *testing.T) {
	t.Parallel()
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		locks := []string{"redislock:{m}a", "redislock:{m}b"}
		rel := []string{locks[0], "redislock:{m}a:wake", "redislock:{m}a:queue", locks[1], "redislock:{m}b:wake", "redislock:{m}b:queue"}
		first, err := MultiObtain(ctx, rdb, locks, "tok", 10000, "")
		require.NoError(t, err, fmt.Sprint(first, err))
		require.True(t, first.Granted, fmt.Sprint(first, err))
		require.Len(t, first.Fences, 2, fmt.Sprint(first, err))
		if again, err := MultiObtain(ctx, rdb, locks, "tok", 10000, ""); err != nil || !again.Granted || again.Fences[1] != first.Fences[1] {
			t.Fatalf("replay = %+v, %v, want the same fences %v", again, err, first.Fences)
		}
		if other, err := MultiObtain(ctx, rdb, locks, "tok2", 10000, ""); err != nil || other.Granted || other.HeldAt != 0 || other.PTTL <= 0 {
			t.Fatalf("other token = %+v, %v, want held at 0", other, err)
		}
		release := func(tok string) int {
			t.Helper()
			n, err := MultiRelease(ctx, rdb, rel, tok, PublishPlain, 3000)
			require.NoError(t, err)
			return n
		}
		if n, replay := release("tok"), release("tok"); n != 2 || replay != 2 {
			t.Fatalf("release = %d, replay = %d, want 2 and 2", n, replay)
		}
		for _, k := range locks {
			if d := rdb.PTTL(ctx, k).Val(); d <= 0 || d > 3*time.Second {
				t.Fatalf("%s: PTTL %v after release", k, d)
			}
		}
		next, err := MultiObtain(ctx, rdb, locks, "tok3", 10000, "")
		require.NoError(t, err, "next = %+v after %v, want each fence + 1", next, first.Fences)
		require.True(t, next.Granted, "next = %+v, %v after %v, want each fence + 1", next, err, first.Fences)
		require.Equal(t, first.Fences[0]+1, next.Fences[0], "next = %+v, %v after %v, want each fence + 1", next, err, first.Fences)
		require.Equal(t, first.Fences[1]+1, next.Fences[1], "next = %+v, %v after %v, want each fence + 1", next, err, first.Fences)
		require.Equal(t, 2, release("tok"), "a replay after the next grant, or another token, answered wrong")
		require.Equal(t, 0, release("nope"), "a replay after the next grant, or another token, answered wrong")
		if n, _ := rdb.DBSize(ctx).Result(); n != 2 {
			t.Fatalf("%d keys, want the two lock keys", n)
		}
	})
}
