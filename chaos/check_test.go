package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Synthetic histories: the checkers themselves must pass clean histories
// and flag broken ones. These need no Redis and run under -short too.

const msec = int64(time.Millisecond)

func grant(w int, tok string, fence, call, ret int64) Op {
	ttl := 100 * time.Millisecond
	return Op{Worker: w, Kind: Acquire, Key: "k", Call: call * msec, Return: ret * msec, TTL: ttl,
		Outcome: OK, Token: tok, Fence: fence, ValidUntil: call*msec + int64(ttl) - 3*msec}
}

func release(w int, tok string, call, ret int64, out Outcome) Op {
	return Op{Worker: w, Kind: Release, Key: "k", Call: call * msec, Return: ret * msec, Outcome: out, Token: tok}
}

func write(w int, fence int64, read, value string, call, ret int64, out Outcome) Op {
	return Op{Worker: w, Kind: Write, Key: "reg", Call: call * msec, Return: ret * msec, Outcome: out, Fence: fence, Read: read, Value: value}
}

func number(ops []Op) []Op {
	for i := range ops {
		ops[i].ID = i + 1
	}
	return ops
}

func TestCheckersPassCleanHistory(t *testing.T) {
	ops := number([]Op{
		grant(1, "aaaa", 10, 0, 2),
		{Worker: 2, Kind: Acquire, Key: "k", Call: 1 * msec, Return: 3 * msec, TTL: 100 * time.Millisecond, Outcome: Fail},
		write(1, 10, "", "1|a", 3, 5, OK),
		release(1, "aaaa", 6, 7, OK),
		grant(2, "bbbb", 11, 8, 9),
		write(2, 11, "1|a", "2|b", 10, 11, OK),
		release(2, "bbbb", 12, 13, OK),
		// an in-doubt acquire, then a grant after it: allowed
		{Worker: 3, Kind: Acquire, Key: "k", Call: 14 * msec, Return: 15 * msec, TTL: 100 * time.Millisecond, Outcome: Unknown, Err: "i/o timeout"},
		grant(1, "cccc", 12, 16, 17),
		release(1, "cccc", 18, 19, OK),
	})
	r := CheckAll("clean", ops, false, "reg", "2|b", 11)
	require.Len(t, r.Violations, 0, fmt.Sprint(r.Explain(ops, nil, 5)))
}

func TestCheckersFlagDoubleGrant(t *testing.T) {
	// B is granted while A's lease is live (what an amnesiac node or a
	// clock jump produces); fences still order the writes.
	ops := number([]Op{
		grant(1, "aaaa", 10, 0, 2),
		write(1, 10, "", "1|a", 3, 4, OK),
		grant(2, "bbbb", 11, 20, 21),
		write(2, 11, "1|a", "2|b", 22, 23, OK),
		write(1, 10, "1|a", "2|a", 30, 31, Fail), // A's late write: rejected
		release(2, "bbbb", 40, 41, OK),
		release(1, "aaaa", 42, 43, Fail),
	})
	r := CheckAll("double", ops, false, "reg", "2|b", 11)
	for _, c := range []string{CheckLeaseOverlap, CheckPorcupine} {
		assert.True(t, r.Has(c), "double grant not flagged by %s:\n%s", c, r.Explain(ops, nil, 5))
	}
	for _, c := range []string{CheckStaleWrite, CheckFenceOrder, CheckWriteLost, CheckLostUpdate} {
		assert.False(t, r.Has(c), "%s flagged a history where fences ordered the writes:\n%s", c, r.Explain(ops, nil, 5))
	}
	if s := r.Explain(ops, nil, 5); !strings.Contains(s, "history slice") || !strings.Contains(s, "#3") {
		t.Errorf("explanation lacks the history slice:\n%s", s)
	}
}

func TestCheckersFlagRawDelete(t *testing.T) {
	// A stale holder deletes the key without the token check (raw DEL),
	// then C is granted while B still holds the lock.
	ops := number([]Op{
		grant(1, "aaaa", 10, 0, 2),
		grant(2, "bbbb", 11, 120, 121), // after A's lease expired: fine
		{Worker: 1, Kind: Release, Key: "k", Call: 130 * msec, Return: 131 * msec, Outcome: OK, Token: "aaaa", Note: "raw DEL (broken variant)"},
		grant(3, "cccc", 12, 132, 133),
	})
	r := CheckAll("rawdel", ops, false, "", "", 0)
	require.True(t, r.Has(CheckLeaseOverlap), "raw DEL not flagged:\n%s", r.Explain(ops, nil, 5))
	require.True(t, r.Has(CheckPorcupine), "raw DEL not flagged:\n%s", r.Explain(ops, nil, 5))
}

func TestCheckersFlagFenceAndRegister(t *testing.T) {
	ops := number([]Op{
		grant(1, "aaaa", 10, 0, 2),
		release(1, "aaaa", 3, 4, OK),
		grant(2, "bbbb", 9, 5, 6), // fence went backwards
		release(2, "bbbb", 7, 8, OK),
		grant(3, "cccc", 9, 9, 10), // duplicate fence
		write(1, 10, "", "1|a", 11, 12, OK),
		write(2, 9, "1|a", "2|b", 13, 14, OK), // stale write accepted
		write(3, 9, "", "1|c", 15, 16, OK),    // lost update: read the same as write #1
		write(3, 12, "", "9|x", 17, 18, Fail), // rejected with no higher fence around
	})
	r := CheckAll("fences", ops, false, "reg", "1|c", 9)
	for _, c := range []string{CheckFenceOrder, CheckFenceUnique, CheckStaleWrite, CheckLostUpdate, CheckWrongReject, CheckWriteLost, CheckPorcupine} {
		assert.True(t, r.Has(c), "not flagged by %s:\n%s", c, r.Explain(ops, nil, 10))
	}
}

func TestCheckersFlagGrantAfterExpiry(t *testing.T) {
	g := grant(1, "aaaa", 10, 0, 200) // returned 200 ms after a 100 ms lease started
	if v := CheckLeases([]Op{g}); len(v) != 1 || v[0].Check != CheckGrantAfterExpiry {
		t.Fatalf("got %v", v)
	}
}

func TestModelUnknownOutcomes(t *testing.T) {
	// Unknown release then a grant to someone else before expiry: legal,
	// because the release may have taken effect.
	ops := number([]Op{
		grant(1, "aaaa", 10, 0, 2),
		release(1, "aaaa", 3, 4, Unknown),
		grant(2, "bbbb", 11, 5, 6),
		{Worker: 3, Kind: Acquire, Key: "k", Call: 7 * msec, Return: 8 * msec, TTL: 100 * time.Millisecond, Outcome: Fail},
	})
	if v := CheckLinearizable("unknown", ops, false, 5*time.Second); len(v) != 0 {
		t.Fatal(v)
	}
	// NotObtained on a free lock is illegal in single mode, legal with split votes.
	ops = number([]Op{{Worker: 3, Kind: Acquire, Key: "k", Call: 1, Return: 2, TTL: time.Second, Outcome: Fail}})
	if v := CheckLinearizable("free-fail", ops, false, 5*time.Second); len(v) != 1 {
		t.Fatalf("single mode: want a violation, got %v", v)
	}
	if v := CheckLinearizable("free-fail-q", ops, true, 5*time.Second); len(v) != 0 {
		t.Fatalf("split votes: want none, got %v", v)
	}
}
