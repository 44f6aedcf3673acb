package redislock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
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
	if _, err := srv.Do("CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "cluster state ok", func() bool {
		info, err := srv.Do("CLUSTER", "INFO")
		s, _ := info.(string)
		return err == nil && strings.Contains(s, "cluster_state:ok")
	})
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
			ctx := ctxT(t, 10*time.Second)
			k := func(s string) string { return t.Name() + "-" + s }
			m, err := c.ObtainMulti(ctx, []string{k("a"), k("b"), k("c")}, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{k("a"), k("b"), k("c")} {
				if !b.exists(t, key) {
					t.Fatalf("%s not held", key)
				}
				if m.Fence(key) <= 0 {
					t.Fatalf("fence of %s = %d", key, m.Fence(key))
				}
			}
			if m.Fence(k("zzz")) != 0 {
				t.Fatal("fence of a key outside the lock")
			}
			if got := m.Keys(); len(got) != 3 || got[0] != k("a") {
				t.Fatalf("Keys() = %v", got)
			}
			// A set that overlaps is refused, and holds nothing afterwards.
			_, err = c.ObtainMulti(ctx, []string{k("d"), k("c")}, 5*time.Second)
			if !errors.Is(err, redislock.ErrNotObtained) {
				t.Fatalf("overlapping ObtainMulti = %v, want ErrNotObtained", err)
			}
			if b.exists(t, k("d")) {
				t.Fatal("partial hold of d left behind")
			}
			// A single-key Obtain on one of the keys is refused too.
			if _, err := c.Obtain(ctx, k("b"), time.Second); !errors.Is(err, redislock.ErrNotObtained) {
				t.Fatalf("Obtain on a multi-locked key = %v", err)
			}
			if err := m.Refresh(ctx, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if d, err := m.TTL(ctx); err != nil || d <= 5*time.Second {
				t.Fatalf("TTL = %v, %v after Refresh(10s)", d, err)
			}
			if err := m.Release(ctx); err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{k("a"), k("b"), k("c")} {
				if b.exists(t, key) {
					t.Fatalf("%s still held after Release", key)
				}
			}
			if err := m.Release(ctx); !errors.Is(err, redislock.ErrNotHeld) {
				t.Fatalf("second Release = %v", err)
			}
			if _, err := m.TTL(ctx); !errors.Is(err, redislock.ErrNotHeld) {
				t.Fatalf("TTL after Release = %v", err)
			}
			// Fences increase across grants, per key.
			m2, err := c.ObtainMulti(ctx, []string{k("c"), k("a")}, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer m2.Release(ctx)
			if m2.Fence(k("a")) <= m.Fence(k("a")) || m2.Fence(k("c")) <= m.Fence(k("c")) {
				t.Fatal("fences did not increase")
			}
		})
	}
}

func TestObtainMultiLostKey(t *testing.T) {
	t.Parallel()
	for _, b := range multiBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, b.rdb)
			ctx := ctxT(t, 10*time.Second)
			a, z := t.Name()+"-a", t.Name()+"-z"
			m, err := c.ObtainMulti(ctx, []string{a, z}, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.rdb.Del(ctx, "redislock:{"+z+"}").Err(); err != nil {
				t.Fatal(err)
			}
			if err := m.Refresh(ctx, 5*time.Second); !errors.Is(err, redislock.ErrNotHeld) {
				t.Fatalf("Refresh with a lost key = %v, want ErrNotHeld", err)
			}
			if b.exists(t, a) {
				t.Fatal("the keys still held were not released")
			}
			if !m.ValidUntil().IsZero() {
				t.Fatal("ValidUntil not cleared")
			}
		})
	}
}

func TestObtainMultiInvalid(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb)
	ctx := ctxT(t, 10*time.Second)
	for _, keys := range [][]string{nil, {}, {""}, {"a", ""}, {"a", "b", "a"}} {
		if _, err := c.ObtainMulti(ctx, keys, time.Second); !errors.Is(err, redislock.ErrInvalidArgument) {
			t.Errorf("ObtainMulti(%q) = %v, want ErrInvalidArgument", keys, err)
		}
	}
	if _, err := c.ObtainMulti(ctx, []string{"a"}, time.Second, redislock.WithFair(true)); !errors.Is(err, redislock.ErrInvalidArgument) {
		t.Errorf("ObtainMulti with WithFair = %v, want ErrInvalidArgument", err)
	}
	var m *redislock.MultiLock
	if err := m.Release(ctx); !errors.Is(err, redislock.ErrNotHeld) {
		t.Errorf("nil MultiLock Release = %v", err)
	}
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
			if b.exists(t, a) || b.exists(t, z) {
				t.Fatal("a lock key is still held after every RunMulti returned")
			}
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
			h, err := c.Obtain(ctxT(t, 10*time.Second), z, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			// z is released once the waiter's first attempt and its
			// recheck after subscribing have found it held.
			b.rdb.AddHook(&scriptHook{at: 2, after: func() { _ = h.Release(context.Background()) }})
			// A backoff longer than the ctx: only the release of z can wake
			// the waiter in time.
			m, err := c.ObtainMulti(ctxT(t, 10*time.Second), []string{a, z}, time.Second,
				redislock.WithRetry(redislock.LinearBackoff(time.Hour)))
			if err != nil {
				t.Fatalf("%v: the release of %s was missed", err, z)
			}
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
	tctx := ctxT(t, 2*time.Minute)
	err := c.RunMulti(tctx, []string{a, z}, 30*time.Second, func(ctx context.Context, m *redislock.MultiLock) error {
		if err := rdb.Del(ctx, "redislock:{"+z+"}").Err(); err != nil {
			return err
		}
		validUntil := m.ValidUntil()
		select {
		case <-ctx.Done():
			// By the renewal that found the key gone, not the lease's end.
			if cause := context.Cause(ctx); !errors.Is(cause, redislock.ErrNotHeld) {
				t.Errorf("cause = %v, want a renewal's ErrNotHeld", cause)
			}
			if !time.Now().Before(validUntil) {
				t.Errorf("loss noticed only after the validity ended")
			}
			return nil
		case <-tctx.Done():
			return errors.New("fn's ctx not cancelled after a key was lost")
		}
	}, redislock.WithRefreshInterval(20*time.Millisecond))
	if !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("RunMulti = %v, want ErrLockLost", err)
	}
	if held(context.Background(), rdb, "redislock:{"+a+"}") {
		t.Fatal("the other key is still held")
	}
}
