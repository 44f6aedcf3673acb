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

// mustObtain obtains key, which must be free. A try whose outcome is
// unknown (a grant confirmed after its validity, a call that timed out: a
// loaded machine, not a refusal) is made again, up to ctxFor's bound; the
// tries after one also wait out, briefly, a grant of such a try that
// reached the backend and is being given back. A refusal of the first try,
// or any other error, fails t.
func mustObtain(t *testing.T, lk lease.Locker, key string, ttl time.Duration, opts ...lease.Option) lease.Lock {
	t.Helper()
	ctx := ctxFor(t)
	again := append(append([]lease.Option{}, opts...), lease.WithRetry(lease.LimitRetry(lease.LinearBackoff(5*time.Millisecond), 20)))
	for try := opts; ; try = again {
		l, err := lk.Obtain(ctx, key, ttl, try...)
		if err == nil {
			t.Cleanup(func() { _ = l.Release(context.Background()) })
			return l
		}
		if !unknownOutcome(err) || ctx.Err() != nil {
			t.Fatalf("Obtain(%q): %v", key, err)
		}
		t.Logf("Obtain(%q): %v; trying again", key, err)
	}
}

// unknownOutcome reports whether err leaves a grant's outcome unknown: the
// call took too long (its deadline passed, or the grant was confirmed after
// its validity), not a refusal or bad input.
func unknownOutcome(err error) bool {
	return (errors.Is(err, lease.ErrGrantExpired) || errors.Is(err, context.DeadlineExceeded)) &&
		!errors.Is(err, lease.ErrNotObtained) && !errors.Is(err, lease.ErrInvalidArgument)
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
