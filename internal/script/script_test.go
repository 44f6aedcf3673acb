package script

import (
	"context"
	"crypto/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/redistest"
)

// The scripts by the names the tests call them.
var obtainScript, refreshScript, releaseScript = obtain, refresh, release

// obtain.lua is idempotent under go-redis' own re-sends: a replay of the
// same request reports the grant with the fence it minted the first time.
func TestObtainScriptReplay(t *testing.T) {
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "replay")
		run := func(token string, proposal int64) []int64 {
			t.Helper()
			res, err := obtainScript.Run(ctx, rdb, k.Obtain[:], token, 10000, proposal, 60000, "").Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		first := run("tok", 0)
		again := run("tok", 0)
		if first[0] != 1 || again[0] != 1 || again[1] != first[1] {
			t.Fatalf("replay = %v after %v, want the same grant", again, first)
		}
		if c, _ := rdb.Get(ctx, k.Fence).Int64(); c != first[1] {
			t.Fatalf("counter %d after replay, want %d (no second fence)", c, first[1])
		}
		if other := run("tok2", 0); other[0] != 0 || other[1] <= 0 {
			t.Fatalf("other token = %v, want held with its PTTL", other)
		}
		// A token that is a prefix of the holder's is someone else.
		if other := run("to", 0); other[0] != 0 {
			t.Fatalf("prefix token = %v, want held", other)
		}
		rdb.Del(ctx, k.Lock)
		// Quorum proposals: at or below the counter are refused with it.
		if low := run("q1", first[1]); low[0] != -1 || low[1] != first[1] {
			t.Fatalf("low proposal = %v", low)
		}
		if ok := run("q2", first[1]+5); ok[0] != 1 || ok[1] != first[1]+5 {
			t.Fatalf("high proposal = %v", ok)
		}
		// Zero or negative TTLs are refused by the script itself.
		rdb.Del(ctx, k.Lock)
		if err := obtainScript.Run(ctx, rdb, k.Obtain[:], "t", 0, 0, 60000, "").Err(); err == nil {
			t.Fatal("obtain with TTL 0 accepted")
		}
		if err := refreshScript.Run(ctx, rdb, []string{k.Lock}, "t", -1).Err(); err == nil {
			t.Fatal("refresh with TTL -1 accepted")
		}
		if n := rdb.Exists(ctx, k.Lock).Val(); n != 0 {
			t.Fatal("a refused obtain wrote the lock")
		}
	})
}

// release.lua answers a replay of its own release (a reply lost to EOF and
// re-sent by go-redis) with "released", never "not held"; another token still
// gets "not held"; the counter keeps counting.
func TestReleaseScriptReplay(t *testing.T) {
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "rel")
		res, err := obtainScript.Run(ctx, rdb, k.Obtain[:], "tok", 10000, 0, 60000, "").Int64Slice()
		if err != nil || res[0] != 1 {
			t.Fatal(res, err)
		}
		release := func(token string) int64 {
			t.Helper()
			n, err := releaseScript.Run(ctx, rdb, k.Release[:], token, "p", 60000, "").Int64()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if first, replay := release("tok"), release("tok"); first != 1 || replay != 1 {
			t.Fatalf("release = %d, its replay = %d, want 1 and 1", first, replay)
		}
		if release("other") != 0 || release("ok") != 0 {
			t.Fatal("another token's release answered 1")
		}
		if ttl := rdb.PTTL(ctx, k.Fence).Val(); ttl <= 0 {
			t.Fatalf("counter lost its TTL: %v", ttl)
		}
		next, err := obtainScript.Run(ctx, rdb, k.Obtain[:], "tok2", 10000, 0, 60000, "").Int64Slice()
		if err != nil || next[0] != 1 || next[1] <= res[1] {
			t.Fatalf("next grant %v after fence %d: %v", next, res[1], err)
		}
		// A replay after other grants and releases still finds its own
		// release, up to 8 releases back.
		cycle := func(tok string) {
			t.Helper()
			if r, err := obtainScript.Run(ctx, rdb, k.Obtain[:], tok, 10000, 0, 60000, "").Int64Slice(); err != nil || r[0] != 1 {
				t.Fatal(r, err)
			}
			if release(tok) != 1 {
				t.Fatal("release", tok)
			}
		}
		if release("tok2") != 1 {
			t.Fatal("release tok2")
		}
		// Real tokens have one length (rand.Text), by which the list is cut.
		toks := make([]string, 40)
		for i := range toks {
			toks[i] = rand.Text()
		}
		for i, tok := range toks {
			cycle(tok)
			// Every release within the last 8 is remembered, whatever
			// the trimming has done.
			for _, back := range toks[max(0, i-7) : i+1] {
				if release(back) != 1 {
					t.Fatalf("release %d: a replay of %d answered not held: %q", i, i-slices.Index(toks, back), rdb.Get(ctx, k.Fence).Val())
				}
			}
		}
		if c := rdb.Get(ctx, k.Release[1]).Val(); len(c) > 16*27 {
			t.Fatalf("released tokens %q grow without bound", c)
		}
		if ttl := rdb.PTTL(ctx, k.Release[1]).Val(); ttl <= 0 {
			t.Fatalf("released tokens without TTL: %v", ttl)
		}
		if release(toks[0]) != 0 {
			t.Fatal("a release 40 back is still remembered")
		}
		// Without a counter (evicted, flushed, expired), the next grant
		// starts it again from the server clock, with a TTL, above every
		// earlier fence.
		before, _ := rdb.Get(ctx, k.Fence).Int64()
		rdb.Del(ctx, k.Fence)
		r, _ := obtainScript.Run(ctx, rdb, k.Obtain[:], "x", 10000, 0, 60000, "").Int64Slice()
		if r[0] != 1 || r[1] <= before {
			t.Fatalf("grant after the counter was lost: %v, after fence %d", r, before)
		}
		if rdb.PTTL(ctx, k.Fence).Val() <= 0 {
			t.Fatalf("counter written without TTL: %v", rdb.PTTL(ctx, k.Fence).Val())
		}
		if release("x") != 1 {
			t.Fatal("release x")
		}
		if low := run2(t, rdb, k, 1); low[0] != -1 {
			t.Fatalf("proposal check after a release: %v", low)
		}
	})
}

func run2(t *testing.T, rdb *redis.Client, k keys.Lock, proposal int64) []int64 {
	t.Helper()
	rdb.Del(context.Background(), k.Lock)
	res, err := obtainScript.Run(context.Background(), rdb, k.Obtain[:], "q", 10000, proposal, 60000, "").Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// eachScriptTarget runs fn against the servers the script tests run on: a
// miniredis, and a real redis-server where there is one.
func eachScriptTarget(t *testing.T, fn func(t *testing.T, rdb *redis.Client)) {
	targets := map[string]string{"miniredis": miniredis.RunT(t).Addr()}
	if redistest.Available(t) {
		targets["redis-server"] = redistest.Start(t).Addr()
	}
	for name, addr := range targets {
		t.Run(name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			defer rdb.Close()
			fn(t, rdb)
		})
	}
}

// obtain.lua with a handoff token releases that grant and grants the new
// token in one step (fence + 1, the old token remembered as released), is
// idempotent under re-sends, and hands over nothing it does not hold.
func TestHandoffScript(t *testing.T) {
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "handoff")
		run := func(token string, from ...any) []int64 {
			t.Helper()
			args := append([]any{token, 10000, 0, 60000, ""}, from...)
			res, err := obtainScript.Run(ctx, rdb, k.Obtain[:], args...).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		first := run("r")
		want := []int64{1, first[1] + 1, 1}
		if got := run("w", "r"); !slices.Equal(got, want) {
			t.Fatalf("handoff = %v, want %v", got, want)
		}
		if got := run("w", "r"); !slices.Equal(got, want) {
			t.Fatalf("replayed handoff = %v, want %v", got, want)
		}
		if v := rdb.Get(ctx, k.Lock).Val(); v != "w:"+strconv.FormatInt(want[1], 10) {
			t.Fatalf("lock holds %q", v)
		}
		if n, _ := releaseScript.Run(ctx, rdb, k.Release[:], "r", "p", 60000, "").Int64(); n != 1 {
			t.Fatal("a replayed release of the handed-over grant answered not held")
		}
		if got := run("x", "y"); got[0] != 0 || got[1] <= 0 || got[2] != 0 {
			t.Fatalf("handoff from a non-holder = %v, want held, not released", got)
		}
		rdb.Del(ctx, k.Lock)
		if got := run("z", "w"); got[0] != 1 || got[1] != want[1]+1 || got[2] != 0 {
			t.Fatalf("handoff of a free lock = %v, want granted, not released", got)
		}
	})
}

// A release publishes a wake-up only when an attempt found the lock held
// (the "*" mark), and a handoff passes the mark on.
func TestReleaseWakesOnlyWaiters(t *testing.T) {
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "mark")
		ps := rdb.Subscribe(ctx, k.Wake)
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		obtain := func(token string, from ...any) int64 {
			t.Helper()
			res, err := obtainScript.Run(ctx, rdb, k.Obtain[:], append([]any{token, 10000, 0, 60000, ""}, from...)...).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			return res[0]
		}
		release := func(token string) {
			t.Helper()
			if n, err := releaseScript.Run(ctx, rdb, k.Release[:], token, "p", 60000, "").Int64(); n != 1 || err != nil {
				t.Fatal(n, err)
			}
		}
		woken := func() bool {
			t.Helper()
			_, err := ps.ReceiveTimeout(ctx, 200*time.Millisecond)
			return err == nil
		}
		obtain("a")
		release("a")
		if woken() {
			t.Fatal("a release nobody waited for published a wake-up")
		}
		obtain("b")
		if obtain("c") != 0 {
			t.Fatal("c granted while b holds")
		}
		if v := rdb.Get(ctx, k.Lock).Val(); !strings.HasPrefix(v, "b:") || !strings.HasSuffix(v, "*") {
			t.Fatalf("lock after a failed attempt = %q, want b's grant marked", v)
		}
		if obtain("d", "b") != 1 {
			t.Fatal("handoff b -> d")
		}
		release("d")
		if !woken() {
			t.Fatal("the release after a handoff woke no one, though c waits")
		}
	})
}

// A fence counter in the format of an earlier version ("fence tok1 tok2"),
// or one that is not a number at all, does not fail the grant: the fence
// continues from its leading number, or from the server clock.
func TestObtainScriptOldCounter(t *testing.T) {
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "old")
		for _, tc := range []struct {
			counter string
			min     int64
		}{{"123 TOKA TOKB", 124}, {"garbage", 1_000_000_000_000_000}} {
			rdb.Del(ctx, k.Lock)
			rdb.Set(ctx, k.Fence, tc.counter, time.Hour)
			res, err := obtainScript.Run(ctx, rdb, k.Obtain[:], "t", 10000, 0, 60000, "").Int64Slice()
			if err != nil || res[0] != 1 || res[1] < tc.min || (tc.min == 124 && res[1] != 124) {
				t.Fatalf("counter %q: obtain = %v, %v", tc.counter, res, err)
			}
			if c, err := rdb.Get(ctx, k.Fence).Int64(); err != nil || c != res[1] {
				t.Fatalf("counter %q: now %v (%v), want %d", tc.counter, c, err, res[1])
			}
		}
	})
}
