package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// The suite's figures, printed at the end of the run (and written to
// $CHAOS_SUMMARY when set) for the README.
var summary struct {
	ops, faults, expected, unexpected, soak atomic.Int64
	mu                                      sync.Mutex
	lines                                   []string
}

func TestMain(m *testing.M) {
	code := 0
	func() {
		defer func() {
			if code == 0 {
				if err := goleak.Find(); err != nil {
					fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
					code = 1
				}
			}
		}()
		code = m.Run()
	}()
	if summary.ops.Load()+summary.soak.Load() > 0 {
		s := fmt.Sprintf("CHAOS-SUMMARY operations_checked=%d faults_injected=%d violations_expected=%d violations_unexpected=%d soak_cycles=%d",
			summary.ops.Load(), summary.faults.Load(), summary.expected.Load(), summary.unexpected.Load(), summary.soak.Load())
		fmt.Println(s)
		summary.mu.Lock()
		for _, l := range summary.lines {
			fmt.Println("CHAOS-CASE " + l)
		}
		summary.mu.Unlock()
		if p := os.Getenv("CHAOS_SUMMARY"); p != "" {
			body := s + "\n"
			for _, l := range summary.lines {
				body += "CHAOS-CASE " + l + "\n"
			}
			_ = os.WriteFile(p, []byte(body), 0o644)
		}
	}
	os.Exit(code)
}

// needRedis guards every test that starts redis-server: they are skipped
// under -short (the fast run) and otherwise need redis-server on PATH
// (mandatory with REDISLOCK_REQUIRE_REDIS=1).
func needRedis(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("chaos: real-Redis fault test skipped under -short")
	}
	redistest.Binary(t)
}

// node is one lock server behind an in-process toxiproxy.
type node struct {
	srv   *redistest.Server
	proxy *Proxy
	rdb   *redis.Client // through the proxy
}

var debugArgs = []string{"--enable-debug-command", "local"}

var aofArgs = []string{"--appendonly", "yes", "--appendfsync", "always"}

func startNodes(t *testing.T, n int, args ...string) []*node {
	t.Helper()
	out := make([]*node, n)
	for i := range out {
		s := redistest.Start(t, append(append([]string{}, debugArgs...), args...)...)
		p := NewProxy(t, fmt.Sprintf("n%d", i), s.Addr())
		rdb := NewClient(t, p.Addr())
		// The handshake, before any toxic.
		require.NoError(t, untilOK(func(ctx context.Context) error { return rdb.Ping(ctx).Err() }), "n%d: no PONG within %v", i, readyWithin)
		out[i] = &node{srv: s, proxy: p, rdb: rdb}
	}
	return out
}

func singleClient(t *testing.T, n *node) *redislock.Client {
	c := redislock.New(n.rdb)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// stagedClient is a lock client on n for the staged tests, which inject no
// fault: its go-redis timeouts are 10 s instead of ClientOptions' 300 ms,
// so a loaded machine slows a step down but does not fail it, and it is
// warmed up (connected, the scripts loaded) before the first step, so a
// step is one round trip.
func stagedClient(t *testing.T, n *node, key string) *redislock.Client {
	t.Helper()
	o := ClientOptions(n.proxy.Addr())
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second, 10*time.Second
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	c := redislock.New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	warmUp(t, Workload{Client: c, Key: key, Workers: 1})
	return c
}

func quorumClient(t *testing.T, ns []*node, opts ...redislock.ClientOption) *redislock.Client {
	rdbs := make([]redis.UniversalClient, len(ns))
	for i, n := range ns {
		rdbs[i] = n.rdb
	}
	c, err := redislock.NewQuorum(rdbs, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// resource starts the protected resource: a redis-server of its own that no
// fault touches.
func resource(t *testing.T, key string) RedisRegister {
	s := redistest.Start(t)
	return RedisRegister{RDB: NewClient(t, s.Addr()), Key: key}
}

func lockKey(k string) string { return redislock.DefaultPrefix + "{" + k + "}" }

// run drives the workload while the nemesis injects faults, then runs every
// checker over the history.
func run(t *testing.T, name string, w Workload, nem Nemesis, splitVotes bool) (Report, []Op, []FaultRecord, Stats) {
	t.Helper()
	warmUp(t, w)
	h := NewHistory()
	ctx, cancel := context.WithTimeout(context.Background(), w.Duration)
	defer cancel()
	var faults int
	done := make(chan struct{})
	go func() { defer close(done); faults = nem.Run(ctx, h) }()
	st := w.Run(context.Background(), h)
	cancel()
	<-done
	fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
	val, fence, err := w.Register.Get(fctx)
	fcancel()
	require.NoError(t, err, "final register read")
	ops, fs := h.Ops(), h.Faults()
	checkStart := time.Now()
	r := CheckAll(strings.ReplaceAll(t.Name(), "/", "_"), ops, splitVotes, w.Register.Name(), val, fence)
	t.Logf("%s: %d ops, %d faults, stats %+v, final register %q fence %d, violations %v (checked in %v)",
		name, len(ops), faults, st, val, fence, r.Checks(), time.Since(checkStart).Round(time.Millisecond))
	errs := map[string]int{}
	for _, o := range ops {
		if o.Outcome == Unknown {
			errs[o.Kind.String()+": "+o.Err]++
		}
	}
	for e, n := range errs {
		t.Logf("  %4d x %s", n, e)
	}
	summary.ops.Add(int64(len(ops)))
	summary.faults.Add(int64(faults))
	return r, ops, fs, st
}

// expectClean asserts the library's claim: no checker finds a violation.
func expectClean(t *testing.T, claim string, r Report, ops []Op, fs []FaultRecord) {
	t.Helper()
	record(t, claim, r, nil)
	assert.LessOrEqual(t, len(r.Violations), 0, "claim %q violated:\n%s", claim, r.Explain(ops, fs, 5))
}

// expectFlagged asserts a documented negative claim: the named checks must
// flag the history (showing the checker works) and the others must not.
func expectFlagged(t *testing.T, claim string, r Report, ops []Op, fs []FaultRecord, want []string, allowed ...string) {
	t.Helper()
	record(t, claim, r, append(append([]string{}, want...), allowed...))
	for _, c := range want {
		assert.True(t, r.Has(c), "claim %q: checker %s did not flag the history:\n%s", claim, c, r.Explain(ops, fs, 5))
	}
	ok := map[string]bool{}
	for _, c := range append(want, allowed...) {
		ok[c] = true
	}
	var bad []Violation
	for _, v := range r.Violations {
		if !ok[v.Check] {
			bad = append(bad, v)
		}
	}
	assert.LessOrEqual(t, len(bad), 0, "claim %q: unexpected violations:\n%s", claim, Report{Ops: r.Ops, Violations: bad}.Explain(ops, fs, 5))
	if t.Failed() {
		return
	}
	t.Logf("claim %q: flagged as expected: %v\n%s", claim, r.Checks(), r.Explain(ops, fs, 1))
}

func record(t *testing.T, claim string, r Report, expectedChecks []string) {
	exp := map[string]bool{}
	for _, c := range expectedChecks {
		exp[c] = true
	}
	var e, u int
	for _, v := range r.Violations {
		if exp[v.Check] {
			e++
		} else {
			u++
		}
	}
	summary.expected.Add(int64(e))
	summary.unexpected.Add(int64(u))
	summary.mu.Lock()
	summary.lines = append(summary.lines, fmt.Sprintf("%s ops=%d expected_violations=%d unexpected_violations=%d checks=%v", t.Name(), r.Ops, e, u, r.Checks()))
	summary.mu.Unlock()
	_ = claim
}

// readyWithin bounds the wait for a node's first PONG and for a client's
// warm-up calls: each call runs under ClientOptions' 300 ms timeouts, which
// a loaded machine can exceed, so it is tried again until it succeeds.
const readyWithin = 30 * time.Second

// untilOK calls f until it returns nil, and at most until readyWithin has
// passed; it returns f's last error.
func untilOK(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	for {
		err := f(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// warmUp makes each of w's workers' calls, at the same time, on keys of
// their own, before any fault: every node then has a connection per worker
// and the scripts loaded. Without it, on a loaded machine, a first call's
// dial and script load can outlast the 100 ms node timeout of a 1 s lease
// on every node, each abandoned call's connection is dropped, and the next
// call starts cold again: no grant in the whole run. A warm-up call can
// itself exceed the go-redis client's 300 ms timeouts on a loaded machine:
// each worker tries again, on a fresh key (a timed-out attempt may hold its
// own), until one Obtain and Release succeed, within readyWithin.
func warmUp(t *testing.T, w Workload) {
	t.Helper()
	errs := make(chan error, w.Workers)
	for i := range w.Workers {
		go func() {
			attempt := 0
			errs <- untilOK(func(ctx context.Context) error {
				attempt++
				l, err := w.Client.Obtain(ctx, fmt.Sprintf("%s:warm:%d:%d", w.Key, i, attempt), time.Minute, redislock.WithNodeTimeout(10*time.Second))
				if err != nil {
					return err
				}
				return l.Release(ctx)
			})
		}()
	}
	for range w.Workers {
		require.NoError(t, <-errs, "warm-up: not ready within %v", readyWithin)
	}
}
