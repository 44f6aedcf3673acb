package redislock_test

import (
	"context"
	"errors"
	"fmt"
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

// multiBackend is a Redis for multi-key tests: rdb runs the lock, plain
// inspects keys.
type multiBackend struct {
	name  string
	rdb   redis.UniversalClient
	plain redis.Cmdable
}

// multiBackends: miniredis, a standalone redis-server (one script per
// attempt), and a one-node Redis Cluster (keys in different slots: one
// script per slot, in canonical order, with rollback).
func multiBackends(t *testing.T) []multiBackend {
	var bs []multiBackend
	for _, b := range backends(t) {
		bs = append(bs, multiBackend{name: b.name, rdb: b.rdb, plain: b.rdb})
	}
	return append(bs, multiBackend{name: "cluster", rdb: startCluster(t), plain: nil})
}

// startCluster starts a one-node Redis Cluster owning every slot.
func startCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	srv := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	_, err := srv.Do("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := srv.Do("CLUSTER", "INFO")
		s, _ := info.(string)
		return err == nil && strings.Contains(s, "cluster_state:ok")
	}, 10*time.Second, 5*time.Millisecond, "cluster state ok")
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}, DialTimeout: time.Second, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func (b multiBackend) exists(t *testing.T, key string) bool {
	t.Helper()
	return held(context.Background(), b.rdb, "redislock:{"+key+"}")
}

func TestObtainMulti(t *testing.T) {
	t.Parallel()
	for _, b := range multiBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, b.rdb)
			ctx := testkit.Context(t)
			k := func(s string) string { return t.Name() + "-" + s }
			m, err := c.ObtainMulti(ctx, []string{k("a"), k("b"), k("c")}, 5*time.Second)
			require.NoError(t, err)
			for _, key := range []string{k("a"), k("b"), k("c")} {
				require.True(t, b.exists(t, key), "%s not held", key)
				require.Greater(t, m.Fence(key), int64(0), "fence of %s", key)
			}
			require.Equal(t, int64(0), m.Fence(k("zzz")), "fence of a key outside the lock")
			got := m.Keys()
			require.Equal(t, 3, len(got), "Keys() = %v", got)
			require.Equal(t, k("a"), got[0], "Keys() = %v", got)
			// A set that overlaps is refused, and holds nothing afterwards.
			_, err = c.ObtainMulti(ctx, []string{k("d"), k("c")}, 5*time.Second)
			require.ErrorIs(t, err, redislock.ErrNotObtained, "overlapping ObtainMulti, want ErrNotObtained")
			require.False(t, b.exists(t, k("d")), "partial hold of d left behind")
			// A single-key Obtain on one of the keys is refused too.
			if _, err := c.Obtain(ctx, k("b"), time.Second); !errors.Is(err, redislock.ErrNotObtained) {
				require.Fail(t, fmt.Sprintf("Obtain on a multi-locked key = %v", err))
			}
			require.NoError(t, m.Refresh(ctx, 10*time.Second))
			if d, err := m.TTL(ctx); err != nil || d <= 5*time.Second {
				require.Fail(t, fmt.Sprintf("TTL = %v, %v after Refresh(10s)", d, err))
			}
			require.NoError(t, m.Release(ctx))
			for _, key := range []string{k("a"), k("b"), k("c")} {
				require.False(t, b.exists(t, key), "%s still held after Release", key)
			}
			require.ErrorIs(t, m.Release(ctx), redislock.ErrNotHeld, "second Release")
			_, err = m.TTL(ctx)
			require.ErrorIs(t, err, redislock.ErrNotHeld, "TTL after Release")
			// Fences increase across grants, per key.
			m2, err := c.ObtainMulti(ctx, []string{k("c"), k("a")}, time.Second)
			require.NoError(t, err)
			defer m2.Release(ctx)
			require.Greater(t, m2.Fence(k("a")), m.Fence(k("a")), "fences did not increase")
			require.Greater(t, m2.Fence(k("c")), m.Fence(k("c")), "fences did not increase")
		})
	}
}

func TestObtainMultiLostKey(t *testing.T) {
	t.Parallel()
	for _, b := range multiBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, b.rdb)
			ctx := testkit.Context(t)
			a, z := t.Name()+"-a", t.Name()+"-z"
			m, err := c.ObtainMulti(ctx, []string{a, z}, 5*time.Second)
			require.NoError(t, err)
			require.NoError(t, b.rdb.Del(ctx, "redislock:{"+z+"}").Err())
			require.ErrorIs(t, m.Refresh(ctx, 5*time.Second), redislock.ErrNotHeld, "Refresh with a lost key, want ErrNotHeld")
			require.False(t, b.exists(t, a), "the keys still held were not released")
			require.True(t, m.ValidUntil().IsZero(), "ValidUntil not cleared")
		})
	}
}

func TestObtainMultiInvalid(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb)
	ctx := testkit.Context(t)
	for _, keys := range [][]string{nil, {}, {""}, {"a", ""}, {"a", "b", "a"}} {
		_, err := c.ObtainMulti(ctx, keys, time.Second)
		assert.ErrorIs(t, err, redislock.ErrInvalidArgument, "ObtainMulti(%q), want ErrInvalidArgument", keys)
	}
	_, err := c.ObtainMulti(ctx, []string{"a"}, time.Second, redislock.WithFair(true))
	assert.ErrorIs(t, err, redislock.ErrInvalidArgument, "ObtainMulti with WithFair, want ErrInvalidArgument")
	var m *redislock.MultiLock
	assert.ErrorIs(t, m.Release(ctx), redislock.ErrNotHeld, "nil MultiLock Release")
}

// TestObtainMultiNoDeadlock: goroutines lock {a,b} and {b,a} by RunMulti
// concurrently, in turn (exclusion): all finish, and nothing stays held.
func TestObtainMultiNoDeadlock(t *testing.T) {
	t.Parallel()
	for _, b := range multiBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, b.rdb)
			a, z := t.Name()+"-a", t.Name()+"-b"
			retry := redislock.WithRetry(redislock.ExponentialBackoff(2*time.Millisecond, 50*time.Millisecond))
			exclusion(t, 16, 4, func(ctx context.Context, n int) (int64, func() error, error) {
				keys := []string{a, z}
				if n%2 == 1 {
					keys = []string{z, a}
				}
				return running(func(fn func(fence int64) error) error {
					return c.RunMulti(ctx, keys, 2*time.Second, func(_ context.Context, m *redislock.MultiLock) error { return fn(m.Fence(a)) }, retry)
				})
			})
			require.False(t, b.exists(t, a), "a lock key is still held after every RunMulti returned")
			require.False(t, b.exists(t, z), "a lock key is still held after every RunMulti returned")
		})
	}
}

// TestObtainMultiWaitsNotified: a waiter blocked by one key of its set is
// woken by that key's release, long before its 5 s backoff.
func TestObtainMultiWaitsNotified(t *testing.T) {
	t.Parallel()
	for _, b := range multiBackends(t) {
		if b.name == "miniredis" {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, b.rdb)
			a, z := t.Name()+"-a", t.Name()+"-z"
			h, err := c.Obtain(testkit.Context(t), z, time.Minute)
			require.NoError(t, err)
			// z is released once the waiter's first attempt and its
			// recheck after subscribing have found it held.
			b.rdb.AddHook(&scriptHook{at: 2, after: func() { _ = h.Release(context.Background()) }})
			// A backoff longer than the ctx: only the release of z can wake
			// the waiter in time.
			m, err := c.ObtainMulti(testkit.Context(t), []string{a, z}, time.Second,
				redislock.WithRetry(redislock.LinearBackoff(time.Hour)))
			require.NoError(t, err, "the release of %s was missed", z)
			defer m.Release(context.Background())
		})
	}
}

// TestRunMultiLost: a key of the set deleted while fn runs is noticed by
// the renewal; fn's ctx is cancelled and RunMulti reports ErrLockLost,
// leaving no key held.
func TestRunMultiLost(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	c := newClient(t, rdb)
	a, z := t.Name()+"-a", t.Name()+"-z"
	// A lease far longer than the renewal interval: only a renewal's
	// finding can end it, however loaded the machine; the test's ctx is a
	// hang guard.
	tctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := c.RunMulti(tctx, []string{a, z}, 30*time.Second, func(ctx context.Context, m *redislock.MultiLock) error {
		if err := rdb.Del(ctx, "redislock:{"+z+"}").Err(); err != nil {
			return err
		}
		validUntil := m.ValidUntil()
		select {
		case <-ctx.Done():
			// By the renewal that found the key gone, not the lease's end.
			assert.ErrorIs(t, context.Cause(ctx), redislock.ErrNotHeld, "cause, want a renewal's ErrNotHeld")
			assert.True(t, time.Now().Before(validUntil), "loss noticed only after the validity ended")
			return nil
		case <-tctx.Done():
			return errors.New("fn's ctx not cancelled after a key was lost")
		}
	}, redislock.WithRefreshInterval(20*time.Millisecond))
	require.ErrorIs(t, err, redislock.ErrLockLost, "RunMulti, want ErrLockLost")
	require.False(t, held(context.Background(), rdb, "redislock:{"+a+"}"), "the other key is still held")
}
