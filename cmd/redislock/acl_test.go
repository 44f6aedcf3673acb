package main_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// aclRules is the least privilege of redislock (the library and the
// command) with the default prefix, as the README documents it: the
// prefix's keys and channels, the scripts, the commands they call, and
// what notified waiting needs.
var aclRules = []string{
	"resetkeys", "~redislock:*", "resetchannels", "&redislock:*", "-@all",
	"+evalsha", "+eval", // every operation is a Lua script (EVALSHA; EVAL at the first call, and after a script flush)
	"+get", "+set", "+del", "+pexpire", "+pttl", "+append", "+time", // called by the scripts
	"+zrange", "+zrem", "+zadd", "+zscore", "+zrangebyscore", // fair queues; ZRANGE also in releases of several keys
	"+hget", "+hset", "+hmget", // fenced records (Store, FencedSet)
	"+hdel", "+hexists", "+hincrby", "+zcard", "+zrank", // semaphores (run -n)
	"+publish", "+spublish", // wake-ups (called by the release scripts)
	"+subscribe", "+unsubscribe", "+ssubscribe", "+sunsubscribe", "+ping", // notified waiting
}

// aclUser creates user with password pw and the rules, plus extra.
func aclUser(t *testing.T, srv *redistest.Server, user, pw string, rules []string, extra ...string) {
	t.Helper()
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + pw}
	for _, r := range append(append([]string(nil), rules...), extra...) {
		args = append(args, r)
	}
	_, err := srv.Do(args...)
	require.NoError(t, err)
}

func without(rules []string, drop ...string) []string {
	var out []string
next:
	for _, r := range rules {
		for _, d := range drop {
			if r == d {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

func userClient(t *testing.T, srv *redistest.Server, user, pw string) *redis.Client {
	return srv.Client(func(o *redis.Options) { o.Username, o.Password = user, pw })
}

// The library works with nothing but the documented privileges, and the
// user can touch nothing else.
func TestACLLibrary(t *testing.T) {
	srv := redistest.Start(t)
	aclUser(t, srv, "locker", "pw", aclRules)
	ctx := context.Background()
	rdb := userClient(t, srv, "locker", "pw")
	c := redislock.New(rdb)
	defer c.Close()

	l, err := c.Obtain(ctx, "job", time.Minute, redislock.WithHolder("svc"))
	require.NoError(t, err)
	_, err = l.TTL(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Refresh(ctx, time.Minute))
	if info, err := c.Inspect(ctx, "job"); err != nil || !info.Held || info.Holder != "svc" {
		t.Fatalf("Inspect: %+v %v", info, err)
	}

	// Notified waiting: a waiter of another Client is woken by the
	// release's PUBLISH; its backoff (10 s) is longer than the bound (5 s).
	waiter := redislock.New(userClient(t, srv, "locker", "pw"))
	defer waiter.Close()
	base := evalshaCalls(t, srv)
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		wl, err := waiter.Obtain(wctx, "job", time.Minute, redislock.WithRetry(redislock.LinearBackoff(10*time.Second)))
		if err == nil {
			err = wl.Release(ctx)
		}
		got <- err
	}()
	srv.WaitSubscribed(t, "redislock:{job}:wake", 1)
	// The waiter's first attempt and its recheck once subscribed are done:
	// only the release's PUBLISH can wake it before its backoff.
	redistest.Eventually(t, 10*time.Second, "the waiter's second attempt", func() bool { return evalshaCalls(t, srv) >= base+2 })
	require.NoError(t, l.Release(ctx))
	require.NoError(t, <-got, "waiter (woken by pub/sub under the ACL)")

	fl, err := c.Obtain(ctx, "fair", time.Minute, redislock.WithFair(true))
	require.NoError(t, err)
	require.NoError(t, fl.Release(ctx))
	m, err := c.ObtainMulti(ctx, []string{"a", "b"}, time.Minute)
	require.NoError(t, err)
	require.NoError(t, m.Release(ctx))
	st := c.Store()
	require.NoError(t, st.Put(ctx, "rec", []byte("v"), 5, time.Minute))
	if r, err := st.Get(ctx, "rec"); err != nil || string(r.Value) != "v" {
		t.Fatalf("Store.Get: %+v %v", r, err)
	}
	require.NoError(t, st.Delete(ctx, "rec", 5))

	// Nothing else.
	for name, err := range map[string]error{
		"GET other":     rdb.Get(ctx, "other").Err(),
		"SET other":     rdb.Set(ctx, "other", "x", 0).Err(),
		"KEYS":          rdb.Keys(ctx, "*").Err(),
		"FLUSHALL":      rdb.FlushAll(ctx).Err(),
		"PUBLISH other": rdb.Publish(ctx, "other", "x").Err(),
	} {
		assert.False(t, err == nil || !strings.Contains(err.Error(), "NOPERM"), "%s: %v, want NOPERM", name, err)
	}

	// A prefix outside the ACL's key pattern, and a user without the
	// scripts: clear errors, never contention.
	other := redislock.New(rdb, redislock.WithPrefix("other:"))
	defer other.Close()
	aclUser(t, srv, "noeval", "pw", without(aclRules, "+evalsha", "+eval"))
	noeval := redislock.New(userClient(t, srv, "noeval", "pw"))
	defer noeval.Close()
	aclUser(t, srv, "noset", "pw", without(aclRules, "+set"))
	noset := redislock.New(userClient(t, srv, "noset", "pw"))
	defer noset.Close()
	for name, lc := range map[string]*redislock.Client{"other prefix": other, "no EVALSHA": noeval, "no SET in the script": noset} {
		_, err := lc.Obtain(ctx, "job", time.Minute, redislock.WithRetry(redislock.LinearBackoff(time.Millisecond)))
		var ne *redislock.NodeError
		assert.False(t, err == nil || errors.Is(err, redislock.ErrNotObtained) || !errors.As(err, &ne), "%s: %v; want a node error, not contention", name, err)
		t.Logf("%s: %v", name, err)
	}
}

// The command under the ACL user: it runs, and a denied command exits 77.
func TestACLCommand(t *testing.T) {
	srv := redistest.Start(t)
	aclUser(t, srv, "locker", "pw", aclRules)
	aclUser(t, srv, "noeval", "pw", without(aclRules, "+evalsha", "+eval"))
	url := func(user, pw string) string { return "redis://" + user + ":" + pw + "@" + srv.Addr() }
	for _, tc := range []struct {
		args []string
		want int
		say  string
	}{
		{[]string{"--addr", url("locker", "pw"), "run", "k", "--", "true"}, 0, ""},
		{[]string{"--addr", url("locker", "pw"), "inspect", "k"}, 0, ""},
		{[]string{"--addr", url("locker", "pw"), "run", "--slots", "2", "k", "--", "true"}, 0, ""},
		{[]string{"--addr", url("noeval", "pw"), "run", "--slots", "2", "k", "--", "true"}, 77, "NOPERM"},
		{[]string{"--addr", url("locker", "pw"), "--prefix", "other:", "run", "k", "--", "true"}, 77, "NOPERM"},
		{[]string{"--addr", url("noeval", "pw"), "run", "k", "--", "true"}, 77, "NOPERM"},
		{[]string{"--addr", url("noeval", "pw"), "run", "--nonblock", "k", "--", "true"}, 77, "NOPERM"},
		{[]string{"--addr", url("locker", "bad"), "run", "k", "--", "true"}, 77, "WRONGPASS"},
	} {
		code, _, stderr := result(t, tc.args...)
		if code != tc.want || !strings.Contains(stderr, tc.say) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args[1:], code, stderr, tc.want, tc.say)
		}
	}
}

// evalshaCalls is the server's count of EVALSHA calls.
func evalshaCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	v, err := srv.Do("INFO", "commandstats")
	require.NoError(t, err)
	s, _ := v.(string)
	_, rest, ok := strings.Cut(s, "cmdstat_evalsha:calls=")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
	return n
}
