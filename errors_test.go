package redislock_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// SCRIPT FLUSH between calls: go-redis falls back from EVALSHA to EVAL.
func TestScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	ctx := ctxT(t, 10*time.Second)
	flush := func() { t.Helper(); rdb.ScriptFlush(ctx) }
	flush()
	l, err := c.Obtain(ctx, "flush", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	flush()
	if err := l.Refresh(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	flush()
	if _, err := l.TTL(ctx); err != nil {
		t.Fatal(err)
	}
	flush()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// An unreachable server is an error of its own, never contention.
func TestUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(func(o *redis.Options) { o.MaxRetries = -1; o.DialTimeout = 200 * time.Millisecond })
	c := newClient(t, rdb)
	ctx := ctxT(t, 10*time.Second)
	l, err := c.Obtain(ctx, "gone", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	_, err = c.Obtain(ctx, "gone2", time.Second, redislock.WithRetry(redislock.LinearBackoff(time.Millisecond)))
	var ne *redislock.NodeError
	if err == nil || errors.Is(err, redislock.ErrNotObtained) || !errors.As(err, &ne) {
		t.Fatalf("Obtain on a dead server = %v, want a *NodeError", err)
	}
	if err := l.Refresh(ctx, time.Second); err == nil || errors.Is(err, redislock.ErrNotHeld) {
		t.Fatalf("Refresh on a dead server = %v, want a connection error", err)
	}
	if err := l.Release(ctx); err == nil || errors.Is(err, redislock.ErrNotHeld) {
		t.Fatalf("Release on a dead server = %v", err)
	}
}

// Redis error replies are errors, never a grant and never contention.
func TestRedisErrorReplies(t *testing.T) {
	ctx := ctxT(t, 20*time.Second)
	check := func(t *testing.T, c *redislock.Client, key, want string) {
		t.Helper()
		l, err := c.Obtain(ctx, key, time.Second, redislock.WithRetry(redislock.LimitRetry(redislock.LinearBackoff(time.Millisecond), 2)))
		if err == nil {
			_ = l.Release(ctx)
			t.Fatal("granted")
		}
		if errors.Is(err, redislock.ErrNotObtained) || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want an error containing %q", err, want)
		}
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
		if err != nil {
			t.Fatal(err)
		}
		big := strings.Repeat("x", 64<<10)
		for i := range 40 {
			rdb.Set(ctx, "fill:"+strconv.Itoa(i), big, 0)
		}
		// Used memory is now well above the limit: every write is refused.
		if err := rdb.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
			t.Fatal(err)
		}
		check(t, c, "oom", "OOM")
		// Release still works under OOM: DEL frees memory.
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release under OOM: %v", err)
		}
	})
}
