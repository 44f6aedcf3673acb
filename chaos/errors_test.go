package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// Error classification on a live server (claim P8): a Redis error reply is
// neither a grant nor ErrNotObtained; it reaches the caller as a *NodeError
// that keeps Redis' own error code. NOSCRIPT is the exception: it recovers
// by itself (EVALSHA falls back to EVAL) and grants.

func directClient(t *testing.T, s *redistest.Server, retries int) *redis.Client {
	o := ClientOptions(s.Addr())
	o.MaxRetries = retries
	o.ReadTimeout = 5 * time.Second
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// assertServerError checks that Obtain on a misbehaving server fails with
// the server's error code and is not mistaken for contention.
func assertServerError(t *testing.T, rdb redis.UniversalClient, key, code string) {
	t.Helper()
	c := redislock.New(rdb)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	l, err := c.Obtain(ctx, key, time.Second)
	summary.ops.Add(1)
	if l != nil || err == nil {
		t.Fatalf("%s: Obtain granted (%v)", code, l)
	}
	assert.False(t, errors.Is(err, redislock.ErrNotObtained), "%s: reported as contention (ErrNotObtained): %v", code, err)
	var ne *redislock.NodeError
	assert.True(t, errors.As(err, &ne), "%s: not a *NodeError: %v", code, err)
	assert.True(t, strings.Contains(err.Error(), code), "%s: error does not carry the server's code: %v", code, err)
	t.Logf("%s -> %v", code, err)
}

func TestErrorReadOnlyReplica(t *testing.T) {
	needRedis(t)
	master := redistest.Start(t)
	host, port, _ := strings.Cut(master.Addr(), ":")
	replica := redistest.Start(t, "--replicaof", host, port)
	assertServerError(t, directClient(t, replica, -1), "readonly", "READONLY")
}

func TestErrorOOM(t *testing.T) {
	needRedis(t)
	s := redistest.Start(t, "--maxmemory", "1mb", "--maxmemory-policy", "noeviction")
	rdb := directClient(t, s, -1)
	ctx := context.Background()
	c := redislock.New(rdb)
	defer c.Close()
	held, err := c.Obtain(ctx, "oom-held", 10*time.Second) // taken before the memory runs out
	require.NoError(t, err)
	big := strings.Repeat("x", 64<<10)
	full := false
	for i := 0; i < 200 && !full; i++ {
		if err := rdb.Set(ctx, "fill:"+strconv.Itoa(i), big, 0).Err(); err != nil {
			require.True(t, strings.Contains(err.Error(), "OOM"), fmt.Sprint(err))
			full = true
		}
	}
	require.True(t, full, "could not fill 1mb of memory")
	assertServerError(t, rdb, "oom", "OOM")
	// Giving a lock back must still work when memory is full: DEL is allowed.
	assert.NoError(t, held.Release(ctx), "Release under OOM")
}

func TestErrorWrongType(t *testing.T) {
	needRedis(t)
	s := redistest.Start(t)
	_, err := s.Do("RPUSH", lockKey("wrongtype"), "x")
	require.NoError(t, err)
	assertServerError(t, directClient(t, s, -1), "wrongtype", "WRONGTYPE")
}

func TestErrorMisconf(t *testing.T) {
	needRedis(t)
	s := redistest.Start(t, "--save", "3600 1")
	// A directory where the snapshot should go makes BGSAVE fail; with a
	// save point configured, Redis then refuses writes with MISCONF.
	require.NoError(t, os.MkdirAll(filepath.Join(s.Dir(), "dump.rdb", "x"), 0o755))
	_, err := s.Do("BGSAVE")
	require.NoError(t, err)
	redistest.Eventually(t, 10*time.Second, "BGSAVE failed", func() bool {
		v, _ := s.Do("INFO", "persistence")
		str, _ := v.(string)
		return strings.Contains(str, "rdb_last_bgsave_status:err")
	})
	assertServerError(t, directClient(t, s, -1), "misconf", "MISCONF")
}

func TestErrorLoading(t *testing.T) {
	needRedis(t)
	s := redistest.Start(t, debugArgs...)
	for _, cmd := range [][]any{
		{"DEBUG", "POPULATE", 2000},
		{"CONFIG", "SET", "key-load-delay", 600}, // µs per key: loading takes ~1.2 s
		{"CONFIG", "SET", "loading-process-events-interval-bytes", 1024},
	} {
		_, err := s.Do(cmd...)
		require.NoError(t, err)
	}
	admin := directClient(t, s, -1)
	reloaded := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		reloaded <- admin.Do(ctx, "DEBUG", "RELOAD").Err()
	}()
	defer func() { <-reloaded }()
	rdb := directClient(t, s, -1)
	loading := false
	for i := 0; i < 100 && !loading; i++ {
		err := rdb.Get(context.Background(), "probe").Err()
		loading = err != nil && strings.HasPrefix(err.Error(), "LOADING")
		if !loading {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !loading {
		t.Skip("could not catch the server while LOADING")
	}
	assertServerError(t, rdb, "loading", "LOADING")
}

func TestErrorNoScriptRecovers(t *testing.T) {
	needRedis(t)
	s := redistest.Start(t)
	rdb := directClient(t, s, 3)
	c := redislock.New(rdb)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	obtain := func(step string) {
		t.Helper()
		l, err := c.Obtain(ctx, "noscript", time.Second)
		summary.ops.Add(1)
		require.NoError(t, err, "%s: Obtain", step)
		require.NoError(t, l.Release(ctx), "%s: Release", step)
	}
	obtain("scripts loaded")
	_, err := s.Do("SCRIPT", "FLUSH")
	require.NoError(t, err)
	obtain("after SCRIPT FLUSH")
	s.Restart()
	summary.faults.Add(1)
	obtain("after a restart")
}
