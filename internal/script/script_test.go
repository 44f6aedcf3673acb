package script

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/redistest"
)

// The scripts by the names the tests call them.
var obtainScript, refreshScript, releaseScript = obtain, refresh, release

// obtain.lua is idempotent under go-redis' own re-sends: a replay of the
// same request reports the grant with the fence it minted the first time.
func TestObtainScriptReplay(t *testing.T) {
	t.Parallel()
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "replay")
		run := func(token string, proposal int64) ObtainReply {
			t.Helper()
			r, err := Obtain{Keys: k.Boxed[:1], Token: token, TTL: 10000, Proposal: proposal, Holder: ""}.Run(ctx, rdb)
			require.NoError(t, err)
			return r
		}
		first := run("tok", 0)
		again := run("tok", 0)
		require.Equal(t, Status(Granted), first.Status, "replay = %+v after %+v, want the same grant", again, first)
		require.False(t, again != first, "replay = %+v after %+v, want the same grant", again, first)
		if other := run("tok2", 0); other.Status != Held || other.PTTL <= 0 || other.PTTL > 10000 {
			t.Fatalf("other token = %+v, want held with its PTTL", other)
		}
		// A token that is a prefix of the holder's is someone else.
		if other := run("to", 0); other.Status != Held {
			t.Fatalf("prefix token = %+v, want held", other)
		}
		if n, err := releaseScript.Run(ctx, rdb, []string{k.Lock}, "tok", 60000, "p").Int64(); n != 1 || err != nil {
			t.Fatal(n, err)
		}
		// Quorum proposals: at or below the released record's fence are
		// refused with it. Equal must be refused too: two racing quorum
		// proposers can compute the same proposal (the same µs, or the same
		// counter seen + 1), and a node that accepted it after the first
		// grant would give a second grant the same fence, which a fenced
		// resource (fence >= newest) cannot tell from the first.
		if low := run("q1", first.Fence); low.Status != LowProposal || low.Counter != first.Fence {
			t.Fatalf("a proposal equal to the last fence = %+v, want LowProposal: accepted, two grants would share fence %d", low, first.Fence)
		}
		if ok := run("q2", first.Fence+5); ok.Status != Granted || ok.Fence != first.Fence+5 {
			t.Fatalf("high proposal = %+v", ok)
		}
		// Zero or negative TTLs are refused by the script itself.
		rdb.Del(ctx, k.Lock)
		require.Error(t, obtainScript.Run(ctx, rdb, []string{k.Lock}, "t", 0, 0, "").Err(), "obtain with TTL 0 accepted")
		require.Error(t, refreshScript.Run(ctx, rdb, []string{k.Lock}, "t", -1).Err(), "refresh with TTL -1 accepted")
		if n := rdb.Exists(ctx, k.Lock).Val(); n != 0 {
			t.Fatal("a refused obtain wrote the lock")
		}
		// A value without expiry answers held with NoExpiry.
		rdb.Set(ctx, k.Lock, "x:1::;", 0)
		if r := run("t", 0); r.Status != Held || r.PTTL != NoExpiry {
			t.Fatalf("a key without expiry = %+v", r)
		}
	})
}

// release.lua answers a replay of its own release (a reply lost to EOF and
// re-sent by go-redis) with "released", never "not held", also after other
// grants came in between; another token still gets "not held". Each
// release leaves the one key with the record TTL, and the fence goes on.
func TestReleaseScriptReplay(t *testing.T) {
	t.Parallel()
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "rel")
		obtain := func(tok string) int64 {
			t.Helper()
			r, err := Obtain{Keys: k.Boxed[:1], Token: tok, TTL: 10000, Holder: ""}.Run(ctx, rdb)
			require.NoError(t, err, fmt.Sprint(r, err))
			require.Equal(t, Status(Granted), r.Status, fmt.Sprint(r, err))
			return r.Fence
		}
		release := func(token string) bool {
			t.Helper()
			ok, err := Release(ctx, rdb, k.Boxed[:1], token, 5000, PublishPlain, false)
			require.NoError(t, err)
			return ok
		}
		first := obtain("tok")
		if a, b := release("tok"), release("tok"); !a || !b {
			t.Fatalf("release = %v, its replay = %v, want true and true", a, b)
		}
		require.False(t, release("other"), "another token's release answered released")
		require.False(t, release("to"), "another token's release answered released")
		if ttl := rdb.PTTL(ctx, k.Lock).Val(); ttl <= 0 || ttl > 5*time.Second {
			t.Fatalf("released record's TTL %v, want in (0, 5s]", ttl)
		}
		if next := obtain("tok2"); next != first+1 {
			t.Fatalf("next grant's fence %d after %d, want +1", next, first)
		}
		// A replay after a later grant (and more releases) still finds its
		// own release, up to 8 releases back.
		require.True(t, release("tok"), "a replay after the next grant answered not held")
		require.True(t, release("tok2"), "release tok2")
		// Real tokens have one length (rand.Text), by which the list is cut.
		toks := make([]string, 40)
		last := first + 1
		for i := range toks {
			toks[i] = rand.Text()
			f := obtain(toks[i])
			require.Equal(t, last+1, f, "fence %d after %d", f, last)
			last = f
			// Every release within the last 8 is remembered, also while
			// the next grant holds the lock.
			for _, back := range toks[max(0, i-7):i] {
				require.True(t, release(back), "grant %d: a replay of %d answered not held: %q", i, i-slices.Index(toks, back), rdb.Get(ctx, k.Lock).Val())
			}
			require.True(t, release(toks[i]), fmt.Sprint("release", i))
		}
		if v := rdb.Get(ctx, k.Lock).Val(); len(v) > len("~:1796122479709531:")+8*27 {
			t.Fatalf("released record %q grows without bound", v)
		}
		require.False(t, release(toks[0]), "a release 40 back is still remembered")
		if n, _ := rdb.DBSize(ctx).Result(); n != 1 {
			t.Fatalf("%d keys after releases, want the lock key alone", n)
		}
		// Without the key (expired, flushed, evicted), the next grant starts
		// from the server clock, above every earlier fence.
		rdb.Del(ctx, k.Lock)
		if f := obtain("x"); f <= last {
			t.Fatalf("grant after the key was lost: %d, after fence %d", f, last)
		}
	})
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

// release.lua with a handoff releases the grant and grants the new token
// in one step (fence + 1, the old token remembered as released), is
// idempotent under re-sends, and hands over nothing it does not hold.
func TestHandoffScript(t *testing.T) {
	t.Parallel()
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "handoff")
		type reply struct {
			released bool
			fence    int64
		}
		run := func(from, to string) reply {
			t.Helper()
			released, fence, err := Handoff{Keys: k.Boxed[:1], Token: from, RecordTTL: 60000, Publish: PublishPlain, To: to, TTL: 10000}.Run(ctx, rdb)
			require.NoError(t, err)
			return reply{released, fence}
		}
		first, err := Obtain{Keys: k.Boxed[:1], Token: "r", TTL: 10000}.Run(ctx, rdb)
		require.NoError(t, err)
		want := reply{true, first.Fence + 1}
		assert.Equal(t, want, run("r", "w"), "handoff")
		assert.Equal(t, want, run("r", "w"), "replayed handoff")
		assert.Equal(t, "w:"+strconv.FormatInt(want.fence, 10)+": r:;", rdb.Get(ctx, k.Lock).Val())
		ok, err := Release(ctx, rdb, k.Boxed[:1], "r", 60000, PublishPlain, false)
		require.NoError(t, err)
		assert.True(t, ok, "a replayed release of the handed-over grant answered not held")
		assert.Equal(t, reply{}, run("y", "x"), "handoff from a non-holder")
		assert.Equal(t, reply{true, 0}, run("r", "x"), "replayed handoff after the next grant: released, not handed")
		assert.True(t, strings.HasPrefix(rdb.Get(ctx, k.Lock).Val(), "w:"), "the holder's grant was touched")
		rdb.Del(ctx, k.Lock)
		assert.Equal(t, reply{}, run("w", "z"), "handoff of a free lock")
		assert.Zero(t, rdb.Exists(ctx, k.Lock).Val(), "a handoff of a free lock granted it")
	})
}

// When memory is full (maxmemory, noeviction) a handoff, whose grant Redis
// refuses to write, releases: the key is deleted and the waiters are
// woken. An attempt on a held lock, whose mark Redis refuses, reports the
// lock held.
func TestScriptsOutOfMemory(t *testing.T) {
	t.Parallel()
	if !redistest.Available(t) {
		t.Skip("redis-server not found")
	}
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	rdb := srv.Client(nil)
	ctx := context.Background()
	k, busy := keys.New("redislock:", "oom"), keys.New("redislock:", "busy")
	for _, key := range []keys.Lock{k, busy} {
		r, err := Obtain{Keys: key.Boxed[:1], Token: "r", TTL: 60000}.Run(ctx, rdb)
		require.NoError(t, err)
		require.Equal(t, Granted, r.Status)
	}
	r, err := Obtain{Keys: k.Boxed[:1], Token: "x", TTL: 60000}.Run(ctx, rdb) // marks k: x waits
	require.NoError(t, err)
	require.Equal(t, Held, r.Status)
	ps := rdb.Subscribe(ctx, k.Wake)
	defer ps.Close()
	_, err = ps.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1").Err())

	r, err = Obtain{Keys: busy.Boxed[:1], Token: "y", TTL: 60000}.Run(ctx, rdb)
	require.NoError(t, err, "an attempt on a held lock, memory full")
	assert.Equal(t, Held, r.Status)
	assert.NotContains(t, rdb.Get(ctx, busy.Lock).Val(), "*", "marked while memory is full")

	released, fence, err := Handoff{Keys: k.Boxed[:1], Token: "r", RecordTTL: 60000, Publish: PublishPlain, To: "w", TTL: 60000}.Run(ctx, rdb)
	require.NoError(t, err, "a handoff, memory full")
	assert.True(t, released)
	assert.Zero(t, fence, "handed over, memory full")
	assert.Zero(t, rdb.Exists(ctx, k.Lock).Val(), "the lock key is still there")
	_, err = ps.ReceiveTimeout(ctx, 5*time.Second)
	assert.NoError(t, err, "the release woke no one, though x waits")
}

// A release publishes a wake-up only when an attempt found the lock held
// (the "*" mark), and a handoff passes the mark on.
func TestReleaseWakesOnlyWaiters(t *testing.T) {
	t.Parallel()
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "mark")
		ps := rdb.Subscribe(ctx, k.Wake)
		defer ps.Close()
		_, err := ps.Receive(ctx)
		require.NoError(t, err)
		obtain := func(token string) int64 {
			t.Helper()
			r, err := Obtain{Keys: k.Boxed[:1], Token: token, TTL: 10000, Holder: ""}.Run(ctx, rdb)
			require.NoError(t, err)
			return int64(r.Status)
		}
		release := func(token string) {
			t.Helper()
			if n, err := releaseScript.Run(ctx, rdb, []string{k.Lock}, token, 60000, "p").Int64(); n != 1 || err != nil {
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
		require.False(t, woken(), "a release nobody waited for published a wake-up")
		obtain("b")
		require.Equal(t, int64(0), obtain("c"), "c granted while b holds")
		if v := rdb.Get(ctx, k.Lock).Val(); !strings.HasPrefix(v, "b:") || !strings.HasSuffix(v, ";*") {
			t.Fatalf("lock after a failed attempt = %q, want b's grant marked", v)
		}
		if _, fence, err := (Handoff{Keys: k.Boxed[:1], Token: "b", RecordTTL: 60000, Publish: PublishPlain, To: "d", TTL: 10000}).Run(ctx, rdb); fence == 0 || err != nil {
			t.Fatal("handoff b -> d", err)
		}
		require.False(t, woken(), "a handoff published a wake-up")
		release("d")
		require.True(t, woken(), "the release after a handoff woke no one, though c waits")
	})
}

// A lock key in a format this version did not write (an earlier version's
// "token:fence", or anything else) is held by someone else: no crash, no
// grant, no release; once it expires the fence starts from the clock.
func TestObtainScriptUnknownValue(t *testing.T) {
	t.Parallel()
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "old")
		for _, v := range []string{"TOKA:123", "TOKA:123:holder;*", "garbage", "~", "~:x:", "~:0123: x", "~:12", "~:1e5: x", "~:-5: x", "~:0x10: x"} {
			rdb.Set(ctx, k.Lock, v, time.Hour)
			r, err := Obtain{Keys: k.Boxed[:1], Token: "t", TTL: 10000, Holder: ""}.Run(ctx, rdb)
			require.NoError(t, err, "value %q: obtain = %+v, want held", v, r)
			require.Equal(t, Status(Held), r.Status, "value %q: obtain = %+v, %v, want held", v, r, err)
			require.Greater(t, r.PTTL, int64(0), "value %q: obtain = %+v, %v, want held", v, r, err)
			if ok, err := Release(ctx, rdb, k.Boxed[:1], "t", 1000, PublishPlain, false); ok || err != nil {
				t.Fatalf("value %q: release = %v, %v", v, ok, err)
			}
			if ms, held, err := TTL(ctx, rdb, k.Boxed[:1], "t"); held || err != nil {
				t.Fatalf("value %q: ttl = %v, %v, %v", v, ms, held, err)
			}
		}
	})
}
