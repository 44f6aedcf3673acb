package chaos

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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
	c := singleClient(t, n)
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
		if err != nil && (worker != 3 || broken) {
			t.Fatalf("worker %d: Obtain: %v", worker, err)
		}
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
		return time.Now().After(a.ValidUntil()) && n.rdb.Exists(ctx, lockKey(key)).Val() == 0
	})
	b := obtain(2, time.Minute) // far longer than the rest of the test
	if broken {
		err := release(1, a, time.Second, func() error { return n.rdb.Del(ctx, lockKey(key)).Err() }, "raw DEL without token check (broken variant)")
		if err != nil {
			t.Fatalf("raw DEL: %v", err)
		}
	} else if err := release(1, a, time.Second, func() error { return a.Release(ctx) }, ""); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatalf("A's Release after its lease: %v, want ErrNotHeld", err)
	}
	third := obtain(3, time.Minute)
	if broken != (third != nil) {
		t.Fatalf("C granted: %v, want %v (B holds the lock; only a raw DEL frees it)", third != nil, broken)
	}
	if third != nil {
		_ = release(3, third, time.Minute, func() error { return third.Release(ctx) }, "")
	}
	_ = release(2, b, time.Minute, func() error { return b.Release(ctx) }, "")
	ops := h.Ops()
	r := CheckAll(strings.ReplaceAll(t.Name(), "/", "_"), ops, false, "", "", 0)
	summary.ops.Add(int64(len(ops)))
	return r, ops
}

// A holder keeps using its grant past ValidUntil against a resource that
// ignores fences: its write lands after a newer holder's (stale write
// accepted) and read-modify-writes overlap (lost update).
func TestBrokenUsePastValidityIsCaught(t *testing.T) {
	needRedis(t)
	n := startNodes(t, 1)[0]
	key := "broken-late"
	w := Workload{
		Client: singleClient(t, n), Register: &MemRegister{Key: "mem:" + key, Unfenced: true}, Key: key,
		Workers: workers, TTL: 150 * time.Millisecond, Duration: 2 * time.Second, Hold: 2 * time.Millisecond,
		Retry: retry(), Seed: 22, Broken: UsePastValidity,
	}
	r, ops, fs, _ := run(t, "broken use past ValidUntil", w, Nemesis{}, false)
	expectFlagged(t, "broken: a grant used past ValidUntil without fencing is caught", r, ops, fs,
		[]string{CheckStaleWrite, CheckLostUpdate},
		CheckWriteLost) // a resource that ignores fences can also end below the highest acknowledged fence
}

// The same late holder against a fenced register: the fence rejects the
// late write, and every checker passes. This is the claim fencing makes.
func TestClaimFencingStopsLateHolder(t *testing.T) {
	needRedis(t)
	n := startNodes(t, 1)[0]
	key := "fenced-late"
	w := Workload{
		Client: singleClient(t, n), Register: &MemRegister{Key: "mem:" + key}, Key: key,
		Workers: workers, TTL: 150 * time.Millisecond, Duration: 2 * time.Second, Hold: 2 * time.Millisecond,
		Retry: retry(), Seed: 22, Broken: UsePastValidity,
	}
	r, ops, fs, st := run(t, "late holder, fenced register", w, Nemesis{}, false)
	if st.WritesStale == 0 {
		t.Errorf("no late write was rejected: the scenario did not happen (stats %+v)", st)
	}
	expectClean(t, "fencing rejects the writes of a holder past its lease", r, ops, fs)
}
