package redislock_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/require"
)

// SCRIPT FLUSH between calls: go-redis falls back from EVALSHA to EVAL.
func TestScriptFlush(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	ctx := testkit.Context(t)
	flush := func() { t.Helper(); rdb.ScriptFlush(ctx) }
	flush()
	l, err := c.Obtain(ctx, "flush", time.Second)
	require.NoError(t, err)
	flush()
	require.NoError(t, l.Refresh(ctx, time.Second))
	flush()
	_, err = l.TTL(ctx)
	require.NoError(t, err)
	flush()
	require.NoError(t, l.Release(ctx))
}

// An unreachable server is an error of its own, never contention.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(func(o *redis.Options) { o.MaxRetries = -1; o.DialTimeout = 200 * time.Millisecond })
	c := newClient(t, rdb)
	ctx := testkit.Context(t)
	l, err := c.Obtain(ctx, "gone", time.Second)
	require.NoError(t, err)
	srv.Kill()
	_, err = c.Obtain(ctx, "gone2", time.Second, redislock.WithRetry(redislock.LinearBackoff(time.Millisecond)))
	var ne *redislock.NodeError
	require.Error(t, err, "Obtain on a dead server, want a *NodeError")
	require.NotErrorIs(t, err, redislock.ErrNotObtained, "Obtain on a dead server, want a *NodeError")
	require.ErrorAs(t, err, &ne, "Obtain on a dead server, want a *NodeError")
	if err := l.Refresh(ctx, time.Second); err == nil || errors.Is(err, redislock.ErrNotHeld) {
		require.Fail(t, fmt.Sprintf("Refresh on a dead server = %v, want a connection error", err))
	}
	err = l.Release(ctx)
	require.Error(t, err, "Release on a dead server")
	require.NotErrorIs(t, err, redislock.ErrNotHeld, "Release on a dead server")
}

// Redis error replies are errors, never a grant and never contention.
func TestRedisErrorReplies(t *testing.T) {
	t.Parallel()
	ctx := testkit.Context(t)
	check := func(t *testing.T, c *redislock.Client, key, want string) {
		t.Helper()
		l, err := c.Obtain(ctx, key, time.Second, redislock.WithRetry(redislock.LimitRetry(redislock.LinearBackoff(time.Millisecond), 2)))
		if err == nil {
			_ = l.Release(ctx)
			require.Fail(t, "granted")
		}
		require.NotErrorIs(t, err, redislock.ErrNotObtained, "got, want an error containing %q", want)
		require.Contains(t, err.Error(), want, "got %v, want an error containing %q", err, want)
	}
	t.Run("WRONGTYPE", func(t *testing.T) {
		srv := redistest.Start(t)
		rdb := srv.Client(nil)
		rdb.RPush(ctx, redislock.DefaultPrefix+"{list}", "x")
		check(t, newClient(t, rdb), "list", "WRONGTYPE")
	})
	t.Run("value without expiry", func(t *testing.T) {
		srv := redistest.Start(t)
		rdb := srv.Client(nil)
		rdb.Set(ctx, redislock.DefaultPrefix+"{plain}", "someone's data", 0)
		check(t, newClient(t, rdb), "plain", "without expiry")
	})
	t.Run("READONLY", func(t *testing.T) {
		primary := redistest.Start(t)
		replica := redistest.Start(t, "--replicaof", "127.0.0.1", strings.TrimPrefix(primary.Addr(), "127.0.0.1:"))
		rdb := replica.Client(func(o *redis.Options) { o.MaxRetries = -1 })
		check(t, newClient(t, rdb), "ro", "READONLY")
	})
	t.Run("OOM", func(t *testing.T) {
		srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
		rdb := srv.Client(nil)
		c := newClient(t, rdb)
		l, err := c.Obtain(ctx, "held-before-oom", time.Minute)
		require.NoError(t, err)
		big := strings.Repeat("x", 64<<10)
		for i := range 40 {
			rdb.Set(ctx, "fill:"+strconv.Itoa(i), big, 0)
		}
		// Used memory is now well above the limit: every write is refused.
		require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1mb").Err())
		check(t, c, "oom", "OOM")
		// Release still works under OOM: DEL frees memory.
		require.NoError(t, l.Release(ctx), "Release under OOM")
	})
}
