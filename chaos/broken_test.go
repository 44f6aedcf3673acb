package chaos

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// Deliberately broken variants, run for real against redis-server: the
// checkers must flag them. A suite whose checkers cannot fail proves nothing.

// A release without the token check (a raw DEL by a holder whose lease
// already ended) deletes the next holder's lock, and a third client is
// granted while the second still holds it. The steps are staged one after
// another on a real server, each waiting for the one before, so that the
// overlap happens on every run however loaded the machine: A's grant ends
// (its key gone, its ValidUntil past), B is granted for a minute, A
// deletes the key, C is granted. The same steps with A's Release (the
// token check) in place of the DEL leave C refused and every checker
// clean: what the checkers flag is the broken release, not the staging.
func TestBrokenRawDeleteIsCaught(t *testing.T) {
	needRedis(t)
	t.Run("raw DEL", func(t *testing.T) {
		r, ops := stagedRelease(t, "broken-rawdel", true)
		expectFlagged(t, "broken: release without token check is caught", r, ops, nil,
			[]string{CheckLeaseOverlap, CheckPorcupine})
	})
	t.Run("Release", func(t *testing.T) {
		r, ops := stagedRelease(t, "staged-release", false)
		expectClean(t, "a release past the lease leaves the next holder's lock alone", r, ops, nil)
	})
}

// stagedRelease runs the steps of TestBrokenRawDeleteIsCaught on key, A
// letting go by a raw DEL (broken) or by Release, and checks the history.
func stagedRelease(t *testing.T, key string, broken bool) (Report, []Op) {
	n := startNodes(t, 1)[0]
	c := stagedClient(t, n, key)
	h := NewHistory()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
	defer cancel()
	obtain := func(worker int, ttl time.Duration) *redislock.Lock {
		t.Helper()
		call := h.Now()
		l, err := c.Obtain(ctx, key, ttl)
		op := Op{Worker: worker, Kind: Acquire, Key: key, Call: call, Return: h.Now(), TTL: ttl, Outcome: Classify(err), Err: errText(err)}
		if err == nil {
			op.Token, op.Fence, op.ValidUntil = l.Token(), l.Fence(), h.At(l.ValidUntil())
		}
		h.Add(op)
		require.False(t, err != nil && (worker != 3 || broken), "worker %d: Obtain: %v", worker, err)
		return l
	}
	release := func(worker int, l *redislock.Lock, ttl time.Duration, do func() error, note string) error {
		call := h.Now()
		err := do()
		h.Add(Op{Worker: worker, Kind: Release, Key: key, Call: call, Return: h.Now(), TTL: ttl, Outcome: Classify(err),
			Token: l.Token(), Err: errText(err), Note: note})
		return err
	}
	a := obtain(1, time.Second)
	// A's lease ends: its ValidUntil passed, its key expired on the server.
	redistest.Eventually(t, 30*time.Second, "the end of A's lease", func() bool {
		if !time.Now().After(a.ValidUntil()) {
			return false
		}
		ex, err := n.rdb.Exists(ctx, lockKey(key)).Result()
		return err == nil && ex == 0 // a timed-out EXISTS is no answer
	})
	b := obtain(2, time.Minute) // far longer than the rest of the test
	if broken {
		err := release(1, a, time.Second, func() error { return n.rdb.Del(ctx, lockKey(key)).Err() }, "raw DEL without token check (broken variant)")
		require.NoError(t, err, "raw DEL")
	} else if err := release(1, a, time.Second, func() error { return a.Release(ctx) }, ""); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatalf("A's Release after its lease: %v, want ErrNotHeld", err)
	}
	third := obtain(3, time.Minute)
	require.False(t, broken != (third != nil), "C granted: %v, want %v (B holds the lock; only a raw DEL frees it)", third != nil, broken)
	if third != nil {
		_ = release(3, third, time.Minute, func() error { return third.Release(ctx) }, "")
	}
	_ = release(2, b, time.Minute, func() error { return b.Release(ctx) }, "")
	ops := h.Ops()
	r := CheckAll(strings.ReplaceAll(t.Name(), "/", "_"), ops, false, "", "", 0)
	summary.ops.Add(int64(len(ops)))
	return r, ops
}
