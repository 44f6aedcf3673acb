package chaos

import (
	"context"
	"testing"
	"time"
)

// Deliberately broken variants, run for real against redis-server: the
// checkers must flag them. A suite whose checkers cannot fail proves nothing.

// A release without the token check (a raw DEL by a holder whose lease
// already ended) deletes the next holder's lock, and a third client is
// granted while the second still holds it.
func TestBrokenRawDeleteIsCaught(t *testing.T) {
	needRedis(t)
	n := startNodes(t, 1)[0]
	key := "broken-rawdel"
	w := Workload{
		Client: singleClient(t, n), Register: resource(t, "reg:"+key), Key: key,
		Workers: workers, TTL: 150 * time.Millisecond, Duration: 2 * time.Second, Hold: 10 * time.Millisecond,
		Retry: retry(), Seed: 21, Broken: RawDelete,
		RawDel: func(ctx context.Context) error { return n.rdb.Del(ctx, lockKey(key)).Err() },
	}
	r, ops, fs, _ := run(t, "broken raw DEL", w, Nemesis{}, false)
	expectFlagged(t, "broken: release without token check is caught", r, ops, fs,
		[]string{CheckLeaseOverlap, CheckPorcupine},
		CheckLostUpdate) // overlapping holders may also lose an update: fencing alone does not stop that
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
