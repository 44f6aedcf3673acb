package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redislock-go/redislock/lease"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustObtain(t *testing.T, lk lease.Locker, key string, ttl time.Duration, opts ...lease.Option) lease.Lock {
	t.Helper()
	l, err := lk.Obtain(ctxFor(t), key, ttl, opts...)
	if err != nil {
		t.Fatalf("Obtain(%q): %v", key, err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

// obtainAfterRelease obtains a lock just released, after lk's own refused
// try, with a few quick tries (50 ms, far less than the released lock's
// TTL, so that only its release frees it). In quorum mode Release returns
// once a majority let go and a refused try gives back a late grant in the
// background; together they can keep a majority held for a moment.
func obtainAfterRelease(t *testing.T, lk lease.Locker, key string, ttl time.Duration) lease.Lock {
	t.Helper()
	return mustObtain(t, lk, key, ttl, lease.WithRetry(lease.LimitRetry(lease.LinearBackoff(5*time.Millisecond), 10)))
}

func wantIs(t *testing.T, what string, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("%s: got %v, want an error matching %v", what, err, target)
		}
	}
}
