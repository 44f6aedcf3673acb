package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
)

// The claims table (README.md, "Reliability") is tested here, one test per
// row. A positive claim runs the contended read-sleep-write workload under
// its faults and expects every checker to pass; a negative claim builds the
// failure on purpose and expects the checkers to flag exactly what the docs
// say can go wrong, and nothing else.

const (
	workers  = 8
	ttl      = 300 * time.Millisecond
	duration = 3 * time.Second
)

func retry() redislock.RetryStrategy {
	return redislock.LimitRetry(redislock.LinearBackoff(10*time.Millisecond), 100)
}

func singleWorkload(t *testing.T, n *node, key string) Workload {
	return Workload{
		Client: singleClient(t, n), Register: resource(t, "reg:"+key), Key: key,
		Workers: workers, TTL: ttl, Duration: duration, Hold: 3 * time.Millisecond,
		Retry: retry(), Refresh: true, Seed: 1,
	}
}

// Single mode, server-side stalls and network faults: SIGSTOP of the node,
// CLIENT PAUSE, DEBUG SLEEP, latency, blackhole and reset-peer through
// toxiproxy. Claim: leases never overlap, fences order grants, the register
// takes no stale write and loses no acknowledged one, the history is
// linearizable against the lock model (unknown outcomes allowed).
func TestClaimSingleStallsAndNetwork(t *testing.T) {
	needRedis(t)
	n := startNodes(t, 1)[0]
	w := singleWorkload(t, n, "single-net")
	nem := Nemesis{Gap: 150 * time.Millisecond, Hold: 250 * time.Millisecond, Seed: 2, Faults: []Fault{
		PauseNode("n0", n.srv),
		ClientPause("n0", n.srv, 200*time.Millisecond),
		DebugSleep("n0", n.srv, 200*time.Millisecond),
		Latency(n.proxy, 100, 50),
		Latency(n.proxy, 400, 0), // longer than the lease: no grant may come back
		Blackhole(n.proxy),
		ResetPeer(n.proxy),
	}}
	r, ops, fs, st := run(t, "single stalls+network", w, nem, false)
	require.NotEqual(t, 0, st.Grants, "no grant at all: the workload did not exercise the lock")
	expectClean(t, "single: stalls and network faults keep mutual exclusion and fencing", r, ops, fs)
}

// Single mode, kill -9 and restart of a node with appendonly yes and
// appendfsync always. Claim: no double grant, fences stay ordered.
func TestClaimSingleRestartAOF(t *testing.T) {
	needRedis(t)
	n := startNodes(t, 1, aofArgs...)[0]
	w := singleWorkload(t, n, "single-aof")
	// A lease that outlasts what a restart's reconnect burst does to a
	// loaded machine: with 300 ms, a worker descheduled between its
	// validity check and its write wrote after its lease (no lease overlap,
	// one lost update: the paused-holder limit fences cannot close), which
	// is not what this claim is about.
	w.TTL = time.Second
	nem := Nemesis{Gap: 300 * time.Millisecond, Hold: 100 * time.Millisecond, Seed: 3, Faults: []Fault{KillRestart("n0", n.srv)}}
	r, ops, fs, _ := run(t, "single restart aof", w, nem, false)
	expectClean(t, "single+AOF always: restart loses nothing", r, ops, fs)
}

// Single mode, kill -9 and restart WITHOUT persistence. Negative claim: the
// lock is forgotten, so a second client is granted while the first still
// holds a valid lease (a double grant, flagged by the lease and porcupine
// checkers); the fence (counter + 1, or the server clock in µs once the counter is lost) still orders the grants,
// so the first holder's late write is rejected.
func TestClaimSingleRestartNoPersistenceDoubleGrant(t *testing.T) {
	needRedis(t)
	n := startNodes(t, 1)[0]
	c := singleClient(t, n)
	reg := resource(t, "reg:amnesia")
	h := NewHistory()
	long := 5 * time.Second
	a := obtainRec(t, h, c, 1, "amnesia", long)
	n.srv.Restart()
	h.AddFault(FaultRecord{Name: "kill-restart n0 (no persistence)", Start: h.Now(), End: h.Now()})
	summary.faults.Add(1)
	b := obtainRec(t, h, c, 2, "amnesia", long)
	if a == nil || b == nil {
		t.Fatal("both obtains must succeed after an amnesiac restart")
	}
	writeRec(t, h, reg, 2, b, "1|b")
	assert.ErrorIs(t, writeRec(t, h, reg, 1, a, "1|a"), redislock.ErrStaleFence, "the first holder's late write: got, want ErrStaleFence")
	releaseRec(t, h, 2, b)
	releaseRec(t, h, 1, a)
	r := check(t, h, false, reg)
	expectFlagged(t, "single without persistence: restart can double-grant; fences still order writes", r, h.Ops(), h.Faults(),
		[]string{CheckLeaseOverlap, CheckPorcupine})
}

// Single mode, the node's clock jumps (emulated: PEXPIRE of the lock key to
// 1 ms). Negative claim: a double grant; fences still order the writes.
func TestClaimSingleClockJumpDoubleGrant(t *testing.T) {
	needRedis(t)
	n := startNodes(t, 1)[0]
	c := singleClient(t, n)
	reg := resource(t, "reg:jump")
	h := NewHistory()
	a := obtainRec(t, h, c, 1, "jump", 5*time.Second)
	f := ClockJump("n0", n.srv, lockKey("jump"))
	start := h.Now()
	require.NoError(t, f.Inject())
	time.Sleep(5 * time.Millisecond)
	h.AddFault(FaultRecord{Name: f.Name, Start: start, End: h.Now()})
	summary.faults.Add(1)
	b := obtainRec(t, h, c, 2, "jump", 5*time.Second)
	if a == nil || b == nil {
		t.Fatal("both obtains must succeed after the clock jump")
	}
	writeRec(t, h, reg, 2, b, "1|b")
	assert.ErrorIs(t, writeRec(t, h, reg, 1, a, "1|a"), redislock.ErrStaleFence, "the first holder's late write: got, want ErrStaleFence")
	releaseRec(t, h, 2, b)
	releaseRec(t, h, 1, a)
	r := check(t, h, false, reg)
	expectFlagged(t, "single: a node clock jump can double-grant; fences still order writes", r, h.Ops(), h.Faults(),
		[]string{CheckLeaseOverlap, CheckPorcupine})
}

// --- small recorded steps for the hand-built scenarios ---

func obtainRec(t *testing.T, h *History, c *redislock.Client, worker int, key string, ttl time.Duration) *redislock.Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	call := h.Now()
	l, err := c.Obtain(ctx, key, ttl)
	op := Op{Worker: worker, Kind: Acquire, Key: key, Call: call, Return: h.Now(), TTL: ttl, Outcome: Classify(err), Err: errText(err)}
	if err == nil {
		op.Token, op.Fence, op.ValidUntil = l.Token(), l.Fence(), h.At(l.ValidUntil())
	} else {
		t.Logf("obtain %s by %d: %v", key, worker, err)
	}
	h.Add(op)
	return l
}

func writeRec(t *testing.T, h *History, reg Register, worker int, l *redislock.Lock, value string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	read, _, _ := reg.Get(ctx)
	call := h.Now()
	err := reg.Set(ctx, value, l.Fence())
	h.Add(Op{Worker: worker, Kind: Write, Key: reg.Name(), Call: call, Return: h.Now(), Outcome: Classify(err),
		Token: l.Token(), Fence: l.Fence(), Read: read, Value: value, Err: errText(err)})
	return err
}

func releaseRec(t *testing.T, h *History, worker int, l *redislock.Lock) error {
	t.Helper()
	call := h.Now()
	err := l.Release(context.Background())
	h.Add(Op{Worker: worker, Kind: Release, Key: l.Key(), Call: call, Return: h.Now(), Outcome: Classify(err), Token: l.Token(), Err: errText(err)})
	return err
}

func check(t *testing.T, h *History, splitVotes bool, reg Register) Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	val, fence, err := reg.Get(ctx)
	require.NoError(t, err)
	ops := h.Ops()
	summary.ops.Add(int64(len(ops)))
	return CheckAll(t.Name(), ops, splitVotes, reg.Name(), val, fence)
}
