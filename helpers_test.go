package redislock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// backend is one kind of Redis the behaviour tests run against.
type backend struct {
	name string
	rdb  *redis.Client
	// elapse lets d pass for key expiry (miniredis fast-forwards; a real
	// server sleeps).
	elapse func(d time.Duration)
	real   *redistest.Server
}

// backends returns a fresh miniredis and, where redis-server exists, a fresh
// real server.
func backends(t *testing.T) []backend {
	t.Helper()
	m := miniredis.RunT(t)
	mc := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = mc.Close() })
	bs := []backend{{name: "miniredis", rdb: mc, elapse: m.FastForward}}
	if redistest.Available(t) {
		srv := redistest.Start(t)
		bs = append(bs, backend{name: "redis-server", rdb: srv.Client(nil), elapse: time.Sleep, real: srv})
	}
	return bs
}

func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

// newClient returns a redislock client that is closed when the test ends.
func newClient(t testing.TB, rdb redis.UniversalClient, opts ...redislock.ClientOption) *redislock.Client {
	c := redislock.New(rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// held reports whether the lock key lockKey holds a grant: a released
// record ("~:...", scripts/release.lua) or no key at all is free.
func held(ctx context.Context, rdb redis.Cmdable, lockKey string) bool {
	v, err := rdb.Get(ctx, lockKey).Result()
	return err == nil && !strings.HasPrefix(v, "~:")
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not reached within %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scriptCalls counts the scripts a server ran (a real server's
// commandstats); 0 on miniredis.
func scriptCalls(t *testing.T, b backend) int {
	t.Helper()
	if b.real == nil {
		return 0
	}
	return evalCalls(b.rdb)
}

// evalCalls counts the scripts the server of rdb ran (commandstats).
func evalCalls(rdb *redis.Client) int {
	var n int
	for _, line := range strings.Split(rdb.Info(context.Background(), "commandstats").Val(), "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
			var calls int
			if i := strings.Index(line, "calls="); i >= 0 {
				for _, r := range line[i+6:] {
					if r < '0' || r > '9' {
						break
					}
					calls = calls*10 + int(r-'0')
				}
			}
			n += calls
		}
	}
	return n
}
