package redislock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkErrText fails t unless err's message is one line, says each phrase
// once (no "redislock: redislock:", no "context canceled: context
// canceled") and, in single mode, names no node.
func checkErrText(t *testing.T, what string, err error, single bool) {
	t.Helper()
	if err == nil {
		assert.Fail(t, fmt.Sprintf("%s: no error", what))
		return
	}
	msg := err.Error()
	assert.NotContains(t, msg, "\n", "%s: message of several lines", what)
	assert.False(t, single && strings.Contains(msg, "node "), "%s: single-mode message names a node: %q", what, msg)
	// Each node's clause of a quorum error ("; ") may say what another's
	// does; within a clause no phrase comes twice.
	for _, clause := range strings.Split(msg, "; ") {
		seen := map[string]bool{}
		for _, part := range strings.Split(clause, ":") {
			part = strings.TrimSpace(part)
			if part == "" || strings.HasPrefix(part, "//") { // an address's port, a URL
				continue
			}
			if seen[part] {
				assert.Fail(t, fmt.Sprintf("%s: %q says %q twice", what, msg, part))
				return
			}
			seen[part] = true
		}
	}
}

// Error messages, from real failures in single and quorum mode: one line,
// each phrase once, no node numbers in single mode.
func TestErrorTexts(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	admin := srv.Client(nil)
	c := newClient(t, rdb)
	ctx := testkit.Context(t)

	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	_, err := newClient(t, down).Obtain(ctx, "e", time.Second)
	checkErrText(t, "unreachable", err, true)

	admin.Set(ctx, redislock.LockKey("noexpiry"), "x", 0)
	_, err = c.Obtain(ctx, "noexpiry", time.Second)
	checkErrText(t, "no expiry", err, true)

	admin.RPush(ctx, redislock.LockKey("list"), "x")
	_, err = c.Obtain(ctx, "list", time.Second)
	checkErrText(t, "wrong type", err, true)

	held, err := c.Obtain(ctx, "held", time.Minute)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = c.Obtain(wctx, "held", time.Second, redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)))
	cancel()
	checkErrText(t, "wait ended by ctx", err, true)

	// A call cut short by its ctx while the server sleeps: paused for
	// writes until the call returned (however long the machine takes to
	// send it).
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", strconv.Itoa(int(testkit.Bound.Milliseconds())), "WRITE").Err())
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = c.Obtain(sctx, "paused", time.Second)
	cancel()
	require.NoError(t, admin.Do(ctx, "CLIENT", "UNPAUSE").Err())
	checkErrText(t, "ctx ended during the call", err, true)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.Obtain(cctx, "cancelled", time.Second)
	checkErrText(t, "ctx cancelled before the call", err, true)

	err = c.Run(ctx, "lost", time.Second, func(ctx context.Context, l *redislock.Lock) error {
		admin.Del(ctx, redislock.LockKey("lost"))
		<-ctx.Done()
		return context.Cause(ctx)
	}, redislock.WithRefreshInterval(10*time.Millisecond))
	checkErrText(t, "lock lost", err, true)
	_ = held.Release(ctx)

	err = redislock.FencedSet(ctx, rdb, "fs", "v", 5, 0)
	if err == nil {
		err = redislock.FencedSet(ctx, rdb, "fs", "v", 4, 0)
	}
	checkErrText(t, "stale fence", err, true)

	// Quorum: two of three nodes down.
	var rdbs []redis.UniversalClient
	for _, addr := range []string{"127.0.0.1:1", "127.0.0.1:2"} {
		d := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		t.Cleanup(func() { _ = d.Close() })
		rdbs = append(rdbs, d)
	}
	q, err := redislock.NewQuorum(append(rdbs, srv.Client(nil)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	_, err = q.Obtain(ctx, "q", time.Second)
	require.ErrorIs(t, err, redislock.ErrNoQuorum, "quorum with 2 of 3 down")
	checkErrText(t, "no quorum", err, false)
}
