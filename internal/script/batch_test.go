package script

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// batch_refresh.lua extends exactly the keys that hold their token, says
// why each other one is not held, and refuses bad arguments before
// touching any key.
func TestBatchRefreshScript(t *testing.T) {
	t.Parallel()
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		key := func(s string) string { return "redislock:{batch}:" + s }
		set := func(k, v string) {
			t.Helper()
			require.NoError(t, rdb.Set(ctx, key(k), v, 10*time.Second).Err())
		}
		set("held", "tok1:7")
		set("other", "tok2:8")
		set("prefix", "tok3x:9") // "tok3" is a prefix of its holder's token
		set("twice", "tok4:10")
		set("released", "~:11: tok5") // a released record lists tok5: not held
		require.NoError(t, rdb.RPush(ctx, key("list"), "x").Err())
		keys := []string{key("held"), key("other"), key("absent"), key("prefix"), key("list"), key("twice"), key("released")}
		tokens := []string{"tok1", "tok1", "tok1", "tok3", "tok1", "tok4", "tok5"}
		got, err := BatchRefresh(ctx, rdb, keys, tokens, 60000, nil)
		require.NoError(t, err)
		want := []BatchStatus{BatchRenewed, BatchNotHeld, BatchNotHeld, BatchNotHeld, BatchWrongType, BatchRenewed, BatchNotHeld}
		require.True(t, slices.Equal(got, want), "statuses %v, want %v", got, want)
		for k, long := range map[string]bool{"held": true, "twice": true, "other": false, "prefix": false} {
			if d := rdb.PTTL(ctx, key(k)).Val(); (d > 30*time.Second) != long {
				t.Errorf("%s: PTTL %v after the batch (extended: %v)", k, d, long)
			}
		}
		if n := rdb.Exists(ctx, key("absent")).Val(); n != 0 {
			t.Error("the batch created an absent key")
		}
		if d := rdb.PTTL(ctx, key("list")).Val(); d != -1 {
			t.Errorf("the list got a TTL (%v)", d)
		}

		for name, args := range map[string][]any{
			"TTL 0":         {0, "tok1"},
			"TTL -1":        {-1, "tok1"},
			"TTL 1.5":       {"1.5", "tok1"},
			"no TTL":        {},
			"missing token": {1000},
			"extra token":   {1000, "tok1", "tok1"},
		} {
			before := rdb.PTTL(ctx, key("held")).Val()
			assert.Error(t, batchRefresh.Run(ctx, rdb, []string{key("held")}, args...).Err(), "%s: accepted", name)
			if after := rdb.PTTL(ctx, key("held")).Val(); after > before {
				t.Errorf("%s: refused, but the key was extended", name)
			}
		}
		if got, err := BatchRefresh(ctx, rdb, nil, nil, 1000, nil); err != nil || len(got) != 0 {
			t.Fatalf("empty batch: %v, %v", got, err)
		}
	})
}

// One call renews 500 locks of one slot.
func TestBatchRefreshScript500(t *testing.T) {
	t.Parallel()
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		// The keys live an hour, in one pipeline: with a 1 s TTL set key by
		// key, the first keys expired before the call on a loaded machine.
		// A renewal to 60 s is then seen as a TTL cut to at most 60 s.
		var keys, tokens []string
		pipe := rdb.Pipeline()
		for i := range 500 {
			k, tok := fmt.Sprintf("redislock:{b500}:%d", i), fmt.Sprintf("t%d", i)
			pipe.Set(ctx, k, tok+":1", time.Hour)
			keys, tokens = append(keys, k), append(tokens, tok)
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
		got, err := BatchRefresh(ctx, rdb, keys, tokens, 60000, make([]BatchStatus, 0, 500))
		require.NoError(t, err)
		for i, s := range got {
			require.Equal(t, BatchStatus(BatchRenewed), s, "key %d: %v", i, s)
		}
		for _, k := range []string{keys[0], keys[499]} {
			d := rdb.PTTL(ctx, k).Val()
			require.True(t, d >= 30*time.Second && d <= time.Minute, "%s: PTTL %v, want the renewal's 60 s", k, d)
		}
	})
}

func TestSlotBatches(t *testing.T) {
	t.Parallel()
	ks := []string{"{a}", "{b}", "{a}x", "{c}", "{b}y"}
	toks := []string{"ta", "tb", "tax", "tc", "tby"}
	one, index := SlotBatches(ks, toks, false)
	require.Len(t, one, 1, "not on a Cluster: %d batches %v, want one of all keys", len(one), one)
	require.Len(t, one[0].Keys, 5, "not on a Cluster: %d batches %v, want one of all keys", len(one), one)
	require.Len(t, index, 1, "not on a Cluster: %d batches %v, want one of all keys", len(one), one)
	batches, index := SlotBatches(ks, toks, true)
	want := [][]int{{0, 2}, {1, 4}, {3}} // by slot, in the order of first appearance
	require.Len(t, batches, len(want), "%d batches, want %d: %v", len(batches), len(want), batches)
	for bi, is := range want {
		for j, i := range is {
			if index[bi][j] != i || batches[bi].Keys[j] != ks[i] || batches[bi].Tokens[j] != toks[i] {
				t.Fatalf("batch %d = %v (index %v), want keys %v", bi, batches[bi], index[bi], is)
			}
		}
	}
}
