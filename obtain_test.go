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

func TestObtainReleaseCycle(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx := ctxT(t, 10*time.Second)
		start := time.Now()
		l, err := c.Obtain(ctx, "cycle", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		end := time.Now()
		if l.Key() != "cycle" || len(l.Token()) < 22 || l.Fence() <= 0 {
			t.Fatalf("bad grant: key %q token %q fence %d", l.Key(), l.Token(), l.Fence())
		}
		// ValidUntil = request start + TTL - (TTL*0.01 + 2ms).
		if v := l.ValidUntil(); v.Before(start.Add(988*time.Millisecond)) || v.After(end.Add(988*time.Millisecond)) {
			t.Fatalf("ValidUntil %v not start+TTL-drift (start %v, end %v)", v, start, end)
		}
		if _, err := c.Obtain(ctx, "cycle", time.Second); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("second Obtain = %v, want ErrNotObtained", err)
		}
		ttl, err := l.TTL(ctx)
		if err != nil || ttl <= 0 || ttl > time.Second {
			t.Fatalf("TTL = %v, %v", ttl, err)
		}
		if err := l.Refresh(ctx, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if ttl, err := l.TTL(ctx); err != nil || ttl <= time.Second {
			t.Fatalf("TTL after Refresh = %v, %v", ttl, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if !l.ValidUntil().IsZero() {
			t.Fatal("ValidUntil not reset after Release")
		}
		if err := l.Release(ctx); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("second Release = %v, want ErrNotHeld", err)
		}
		if _, err := l.TTL(ctx); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("TTL after Release = %v", err)
		}
		if err := l.Refresh(ctx, time.Second); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("Refresh after Release = %v", err)
		}
		l2, err := c.Obtain(ctx, "cycle", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Release(ctx)
		if l2.Token() == l.Token() || l2.Fence() <= l.Fence() {
			t.Fatalf("second grant: token %q fence %d after %q %d", l2.Token(), l2.Fence(), l.Token(), l.Fence())
		}
	})
}

// Keys are binary-safe and namespaced; a lock's keys share a hash tag.
func TestKeys(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx := ctxT(t, 10*time.Second)
		keys := []string{"plain", "a}b", "}x", "{y}", "%7D", "}", "bin\x00\xff\r\n", strings.Repeat("k", 64<<10)}
		locks := map[string]*redislock.Lock{}
		for _, k := range keys {
			l, err := c.Obtain(ctx, k, time.Second)
			if err != nil {
				t.Fatalf("Obtain(%q): %v", k[:min(len(k), 20)], err)
			}
			if l.Key() != k {
				t.Fatal("Key() does not round-trip")
			}
			locks[k] = l
		}
		all, err := b.rdb.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(keys) { // one key per lock: no two collided
			t.Fatalf("%d Redis keys for %d locks", len(all), len(keys))
		}
		for _, k := range all {
			if !strings.HasPrefix(k, redislock.DefaultPrefix+"{") {
				t.Fatalf("key %q not namespaced", k[:min(len(k), 40)])
			}
			if tag := hashTag(k); tag == "" {
				t.Fatalf("key %q has no hash tag", k[:min(len(k), 40)])
			}
		}
		for k, l := range locks {
			lockKey := redislock.DefaultPrefix + "{" + strings.NewReplacer("%", "%25", "}", "%7D").Replace(k) + "}"
			if hashTag(lockKey) != hashTag(lockKey+":wake") || b.rdb.Exists(ctx, lockKey).Val() != 1 {
				t.Fatalf("lock %q: key missing or its channel in another slot", k[:min(len(k), 20)])
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		c2 := newClient(t, b.rdb, redislock.WithPrefix("other:"))
		l, err := c2.Obtain(ctx, "plain", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		if b.rdb.Exists(ctx, "other:{plain}").Val() != 1 {
			t.Fatal("WithPrefix not applied")
		}
	})
}

// hashTag is the part of key that Redis Cluster hashes.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return key[i+1 : i+1+j]
}

// 16 goroutines take the lock in turn, and the grants' fences increase
// in grant order (exclusion).
func TestMutualExclusion(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb, redislock.WithRetry(redislock.LinearBackoff(time.Millisecond)))
		rounds := 15
		if b.real == nil {
			rounds = 3 // miniredis serialises everything: keep it short
		}
		exclusion(t, 16, rounds, func(ctx context.Context, _ int) (int64, func() error, error) {
			l, err := c.Obtain(ctx, "mutex", 5*time.Second, redislock.WithMaxWait(30*time.Second))
			return obtained(ctx, l, err)
		})
	})
}

// The retry loop ends with the ctx, reporting both causes.
func TestRetryBoundedByContext(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b.rdb)
		ctx := ctxT(t, 10*time.Second)
		l, err := c.Obtain(ctx, "busy", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)

		// (Long enough for the first attempt to find the lock held on a
		// loaded machine: a ctx that ends the first attempt itself is the
		// ctx's error, not contention.)
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err = c.Obtain(short, "busy", time.Second, redislock.WithRetry(redislock.LinearBackoff(5*time.Millisecond)))
		if !errors.Is(err, redislock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want ErrNotObtained joined with DeadlineExceeded", err)
		}
		// Cancelled once it waits.
		cctx, cancel2 := context.WithCancel(ctx)
		cw := newClient(t, b.rdb, redislock.WithObserver(onWait(cancel2)))
		_, err = cw.Obtain(cctx, "busy", time.Second, redislock.WithRetry(redislock.LinearBackoff(5*time.Millisecond)))
		if !errors.Is(err, redislock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want ErrNotObtained joined with Canceled", err)
		}
		// Without a ctx deadline, WithMaxWait bounds the loop.
		_, err = c.Obtain(context.Background(), "busy", time.Second,
			redislock.WithRetry(redislock.LinearBackoff(5*time.Millisecond)), redislock.WithMaxWait(30*time.Millisecond))
		if !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("got %v, want ErrNotObtained", err)
		}
		// LimitRetry bounds it too.
		_, err = c.Obtain(ctx, "busy", time.Second, redislock.WithRetry(redislock.LimitRetry(redislock.LinearBackoff(time.Millisecond), 3)))
		if !errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want plain ErrNotObtained", err)
		}
	})
}

// A retrying waiter gets the lock once the holder releases it.
func TestRetryObtainsAfterRelease(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t, 10*time.Second)
		l, err := newClient(t, b.rdb).Obtain(ctx, "handoff", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// Released once the waiter waits.
		c := newClient(t, b.rdb, redislock.WithObserver(onWait(func() { go l.Release(ctx) })))
		l2, err := c.Obtain(ctx, "handoff", time.Second, redislock.WithRetry(redislock.ExponentialBackoff(time.Millisecond, 10*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		_ = l2.Release(ctx)
	})
}

// A grant or refresh whose reply comes back after its validity is refused
// with ErrGrantExpired: the reply is held back by the proxy until the
// validity (TTL 10 s, drift factor 0.9: 998 ms from the request, time
// enough for the other calls on a loaded machine) has passed for sure,
// while the key lives on in Redis for the TTL. The late grant,
// and the lock of a late refresh, are released.
func TestLateReplyRefused(t *testing.T) {
	t.Parallel()
	if !redistest.Available(t) {
		return
	}
	srv := redistest.Start(t)
	p := redistest.StartProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	admin := srv.Client(nil)
	const ttl = 10 * time.Second
	c := newClient(t, rdb, redislock.WithDriftFactor(0.9), redislock.WithNodeTimeout(time.Minute))
	ctx := ctxT(t, 30*time.Second)
	validity := ttl - time.Duration(0.9*float64(ttl)) - 2*time.Millisecond

	// late runs op with the replies held back until the validity of a
	// request sent now has passed.
	late := func(op func() error) error {
		t.Helper()
		sent := p.HoldReplies()
		done := make(chan error, 1)
		go func() { done <- op() }()
		at := <-sent // the call started before its request got here
		time.Sleep(time.Until(at.Add(validity + time.Millisecond)))
		p.Let()
		return <-done
	}

	warm, err := c.Obtain(ctx, "late", ttl) // loads the scripts: one round trip each
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var l *redislock.Lock
	err = late(func() (err error) {
		l, err = c.Obtain(ctx, "late", ttl)
		return err
	})
	if !errors.Is(err, redislock.ErrGrantExpired) || l != nil {
		t.Fatalf("Obtain with a late reply = %v, %v, want ErrGrantExpired", l, err)
	}
	// The error says why: how long the call took, and that a longer TTL
	// leaves room for it.
	if msg := err.Error(); !strings.Contains(msg, "took") || !strings.Contains(msg, "longer TTL") {
		t.Fatalf("ErrGrantExpired gives no hint: %q", msg)
	}
	if v := admin.Get(ctx, redislock.DefaultPrefix+"{late}").Val(); !strings.HasPrefix(v, "~:") {
		t.Fatalf("after the late grant the lock key holds %q, want it released", v)
	}

	l, err = c.Obtain(ctx, "late", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := late(func() error { return l.Refresh(ctx, ttl) }); !errors.Is(err, redislock.ErrGrantExpired) {
		t.Fatalf("Refresh with a late reply = %v, want ErrGrantExpired", err)
	}
	if !l.ValidUntil().IsZero() {
		t.Fatalf("after a late refresh ValidUntil = %v, want zero (not held)", l.ValidUntil())
	}
	if v := admin.Get(ctx, redislock.DefaultPrefix+"{late}").Val(); !strings.HasPrefix(v, "~:") {
		t.Fatalf("after the late refresh the lock key holds %q, want it released", v)
	}
}
