package redislock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
)

// A stale holder, whose lease ended and whose key a newer grant took, reads
// no TTL, extends nothing and releases nothing: the newer lease is
// untouched.
func TestStaleHolderAfterNewerGrant(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t, 10*time.Second)
		c := newClient(t, b.rdb)
		stale, err := c.Obtain(ctx, "stale", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// Its lease ends (as if expired: the key is gone), and a newer
		// grant, with a much longer lease, takes the key.
		b.rdb.Del(ctx, redislock.DefaultPrefix+"{stale}")
		fresh, err := c.Obtain(ctx, "stale", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := stale.TTL(ctx); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("stale holder's TTL = %v, %v, want ErrNotHeld (not the newer lease)", d, err)
		}
		if err := stale.Refresh(ctx, time.Minute); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("stale holder's Refresh = %v, want ErrNotHeld", err)
		}
		if err := stale.Release(ctx); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("stale holder's Release = %v, want ErrNotHeld", err)
		}
		if d, err := fresh.TTL(ctx); err != nil || d <= 10*time.Second {
			t.Fatalf("newer holder's TTL = %v, %v, want its hour", d, err)
		}
		// And once the newer grant is released, the stale one still
		// reads nothing from the released record.
		if err := fresh.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if d, err := stale.TTL(ctx); !errors.Is(err, redislock.ErrNotHeld) {
			t.Fatalf("stale holder's TTL after the release = %v, %v, want ErrNotHeld", d, err)
		}
	})
}

// After Release, a lock leaves exactly one key: its released record, with
// a TTL of the lock's TTL, at least the release timeout; plain, fair and
// multi-key locks alike, and no key is ever without expiry.
func TestKeysLeftAfterRelease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t, 10*time.Second)
		const rt = 300 * time.Millisecond
		c := newClient(t, b.rdb, redislock.WithReleaseTimeout(rt))
		if d := redislock.RecordTTL(50*time.Millisecond, rt); d != rt {
			t.Fatalf("record TTL of a 50 ms lock = %v, want the release timeout", d)
		}
		if d := redislock.RecordTTL(time.Minute, rt); d != time.Minute {
			t.Fatalf("record TTL of a 1 min lock = %v, want its TTL", d)
		}
		// left checks the keys in Redis: want of them, each with a TTL in
		// (0, bound]; released: each a released record.
		left := func(how string, want int, bound time.Duration, released bool) {
			t.Helper()
			ks, err := b.rdb.Keys(ctx, "*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(ks) != want {
				t.Fatalf("%s: keys %q, want %d", how, ks, want)
			}
			for _, k := range ks {
				if d := b.rdb.PTTL(ctx, k).Val(); d <= 0 || d > bound {
					t.Errorf("%s: key %q has PTTL %v, want in (0, %v]", how, k, d, bound)
				}
				if v := b.rdb.Get(ctx, k).Val(); released && !strings.HasPrefix(v, "~:") {
					t.Errorf("%s: key %q holds %q, want a released record", how, k, v)
				}
			}
		}
		for _, tc := range []struct {
			name  string
			ttl   time.Duration
			bound time.Duration
			opts  []redislock.Option
		}{
			{"plain", 5 * time.Second, 5 * time.Second, nil},
			{"short", 50 * time.Millisecond, rt, nil},
			{"fair", 5 * time.Second, 5 * time.Second, []redislock.Option{redislock.WithFair(true)}},
			{"holder", 5 * time.Second, 5 * time.Second, []redislock.Option{redislock.WithHolder("w:1;*")}},
		} {
			b.rdb.FlushAll(ctx)
			l, err := c.Obtain(ctx, tc.name, tc.ttl, tc.opts...)
			if err != nil {
				t.Fatal(tc.name, err)
			}
			left(tc.name+" held", 1, tc.ttl, false)
			if err := l.Release(ctx); err != nil {
				t.Fatal(tc.name, err)
			}
			left(tc.name+" released", 1, tc.bound, true)
			// The next grant reuses the key: still one.
			l, err = c.Obtain(ctx, tc.name, tc.ttl, tc.opts...)
			if err != nil {
				t.Fatal(tc.name, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(tc.name, err)
			}
			left(tc.name+" released twice", 1, tc.bound, true)
		}

		b.rdb.FlushAll(ctx)
		m, err := c.ObtainMulti(ctx, []string{"m1", "m2", "m3"}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Release(ctx); err != nil {
			t.Fatal(err)
		}
		left("multi released", 3, 5*time.Second, true)

		// A released record expires: nothing is left.
		b.rdb.FlushAll(ctx)
		l, err := c.Obtain(ctx, "gone", 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		b.elapse(rt + 100*time.Millisecond)
		left("after the record's TTL", 0, 0, true)
	})
}

// Fences increase strictly per key across releases, expiries of the lock
// and of its released record, a handed-over grant, and the loss of all
// data (FLUSHALL): the next fence comes from the record, or from the
// server clock when there is none.
func TestFenceIncreasesAcrossLoss(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t, 10*time.Second)
		const rt = 300 * time.Millisecond
		c := newClient(t, b.rdb, redislock.WithReleaseTimeout(rt))
		var last int64
		next := func(how string, ttl time.Duration, opts ...redislock.Option) *redislock.Lock {
			t.Helper()
			l, err := c.Obtain(ctx, "f", ttl, opts...)
			if err != nil {
				t.Fatal(how, err)
			}
			if l.Fence() <= last {
				t.Fatalf("fence %d after %d (%s): fences must increase", l.Fence(), last, how)
			}
			last = l.Fence()
			return l
		}
		release := func(l *redislock.Lock) {
			t.Helper()
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		release(next("first", 5*time.Second))
		first := last
		release(next("after a release", 5*time.Second))
		if last != first+1 {
			t.Fatalf("fence %d after a release of %d, want +1", last, first)
		}
		release(next("fair, after a release", 5*time.Second, redislock.WithFair(true)))
		next("before an expiry", 50*time.Millisecond)
		b.elapse(100 * time.Millisecond)
		release(next("after the lock expired", 50*time.Millisecond))
		b.elapse(rt + 100*time.Millisecond) // the record expires too
		l := next("after the record expired", 5*time.Second)
		if err := b.rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
		release(next("after FLUSHALL", 5*time.Second))
		b.rdb.FlushAll(ctx)
		m, err := c.ObtainMulti(ctx, []string{"f", "g"}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Fence("f") <= last {
			t.Fatalf("multi fence %d after %d", m.Fence("f"), last)
		}
		last = m.Fence("f")
		if err := m.Release(ctx); err != nil {
			t.Fatal(err)
		}
		release(next("after a multi release", 5*time.Second))
	})
}
