package redislock_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/lease/leasetest"
	"github.com/redislock-go/redislock/observe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// backend is one kind of Redis the behaviour tests run against.
type backend struct {
	name string
	rdb  *redis.Client
	// elapse lets d pass for key expiry (miniredis fast-forwards; a real
	// server expires keys on its own clock, which no test controls, so
	// there it is a sleep).
	elapse func(d time.Duration)
	real   *redistest.Server
}

// backends returns a fresh miniredis and, where redis-server exists, a fresh
// real server. Under GODEBUG=fips140=only the real server alone: miniredis
// names scripts by a SHA-1 of its own, which that mode refuses.
func backends(t *testing.T) []backend {
	t.Helper()
	var bs []backend
	if !redistest.FIPSOnly() {
		m := miniredis.RunT(t)
		mc := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = mc.Close() })
		bs = append(bs, backend{name: "miniredis", rdb: mc, elapse: m.FastForward})
	}
	if redistest.FIPSOnly() || redistest.Available(t) {
		srv := redistest.Start(t)
		bs = append(bs, backend{name: "redis-server", rdb: srv.Client(nil), elapse: time.Sleep, real: srv})
	}
	return bs
}

// eachBackend runs fn on each backend, in parallel subtests.
func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// newClient returns a redislock client that is closed when the test ends.
func newClient(t testing.TB, rdb redis.UniversalClient, opts ...redislock.ClientOption) *redislock.Client {
	c := redislock.New(rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// held reports whether the lock key lockKey holds a grant: a released
// record ("~:...", scripts/release.lua) or no key at all is free.
func held(ctx context.Context, rdb redis.Cmdable, lockKey string) bool {
	v, err := rdb.Get(ctx, lockKey).Result()
	return err == nil && !strings.HasPrefix(v, "~:")
}

// scriptCalls counts the scripts a server ran (a real server's
// commandstats); 0 on miniredis.
func scriptCalls(t *testing.T, b backend) int {
	t.Helper()
	if b.real == nil {
		return 0
	}
	return evalCalls(b.rdb)
}

// evalCalls counts the scripts the server of rdb ran (commandstats).
func evalCalls(rdb *redis.Client) int {
	var n int
	for _, line := range strings.Split(rdb.Info(context.Background(), "commandstats").Val(), "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
			var calls int
			if i := strings.Index(line, "calls="); i >= 0 {
				for _, r := range line[i+6:] {
					if r < '0' || r > '9' {
						break
					}
					calls = calls*10 + int(r-'0')
				}
			}
			n += calls
		}
	}
	return n
}

// scriptHook is a go-redis hook that counts its client's script calls
// (EVAL, EVALSHA) and runs before and after (if set) around the at-th one.
type scriptHook struct {
	at     int32
	calls  atomic.Int32
	before func()
	after  func()
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := strings.ToLower(cmd.Name())
		if name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		hit := h.calls.Add(1) == h.at
		if hit && h.before != nil {
			h.before()
		}
		err := next(ctx, cmd)
		if hit && h.after != nil {
			h.after()
		}
		return err
	}
}

func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// waitStarts counts WaitStart events, and signals each on ch.
type waitStarts struct {
	n  atomic.Int32
	ch chan struct{}
}

func newWaitStarts() *waitStarts { return &waitStarts{ch: make(chan struct{}, 100)} }

func (w *waitStarts) WaitStart(context.Context, observe.WaitEvent) {
	w.n.Add(1)
	w.ch <- struct{}{}
}

// onWait is a WaitObserver that runs f at each WaitStart, on the waiting
// caller's goroutine, before it waits.
type onWait func()

func (f onWait) WaitStart(context.Context, observe.WaitEvent) { f() }

// exclusion checks mutual exclusion with leasetest.Exclusion: workers
// goroutines each take a lock rounds times with obtain (n counts the
// calls), which returns the grant's fence and how to give it back. The
// fences, in the order of the grants, must increase.
func exclusion(t *testing.T, workers, rounds int, obtain func(ctx context.Context, n int) (fence int64, release func() error, err error)) {
	t.Helper()
	var mu sync.Mutex
	var fences []int64
	calls := 0
	leasetest.Exclusion(t, workers, rounds, func(ctx context.Context) (func(), error) {
		mu.Lock()
		n := calls
		calls++
		mu.Unlock()
		fence, release, err := obtain(ctx, n)
		if err != nil {
			return nil, err
		}
		mu.Lock() // held: the appends are in grant order
		fences = append(fences, fence)
		mu.Unlock()
		return func() {
			assert.NoError(t, release(), "release")
		}, nil
	})
	for i := 1; i < len(fences); i++ {
		require.Greater(t, fences[i], fences[i-1], "grant %d: fence after %d: fences out of grant order", i, fences[i-1])
	}
}

// obtained adapts an Obtain for exclusion.
func obtained(ctx context.Context, l *redislock.Lock, err error) (int64, func() error, error) {
	if err != nil {
		return 0, nil, err
	}
	return l.Fence(), func() error { return l.Release(ctx) }, nil
}

// running adapts Run (or RunMulti) for exclusion: run calls fn with the
// grant's fence once it holds the lock, and the lock stays held until the
// release returned, which returns Run's error.
func running(run func(fn func(fence int64) error) error) (int64, func() error, error) {
	held := make(chan int64, 1)
	done := make(chan error, 1)
	unlock := make(chan struct{})
	go func() {
		done <- run(func(fence int64) error {
			held <- fence
			<-unlock
			return nil
		})
	}()
	select {
	case fence := <-held:
		return fence, func() error { close(unlock); return <-done }, nil
	case err := <-done:
		return 0, nil, err
	}
}

// renewals is an Observer that signals each renewal that got through (ok)
// and each that failed (failed); a signal nobody waits for is dropped.
type renewals struct{ ok, failed chan struct{} }

func newRenewals() renewals {
	return renewals{ok: make(chan struct{}, 1), failed: make(chan struct{}, 1)}
}

func (r renewals) RefreshStart(ctx context.Context, _ observe.RefreshStartEvent) context.Context {
	return ctx
}

func (r renewals) RefreshDone(_ context.Context, e observe.RefreshDoneEvent) {
	if !e.Renewal {
		return
	}
	ch := r.ok
	if e.Err != nil {
		ch = r.failed
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// countedRetry is a RetryStrategy that signals each wait it hands out: each
// is one turn of its caller's wait loop, where an attempt would be made
// (a waiter queued behind another takes its turns without attempting).
type countedRetry struct {
	redislock.RetryStrategy
	turns chan struct{}
}

func newCountedRetry(r redislock.RetryStrategy) countedRetry {
	return countedRetry{RetryStrategy: r, turns: make(chan struct{}, 1)}
}

func (r countedRetry) Backoff(attempt int) (time.Duration, bool) {
	select {
	case r.turns <- struct{}{}:
	default: // one signal pending is enough: await counts turns since it began
	}
	return r.RetryStrategy.Backoff(attempt)
}

// await waits until the caller took n more turns, counted from now.
func (r countedRetry) await(t *testing.T, n int) {
	t.Helper()
	select {
	case <-r.turns: // a turn before now
	default:
	}
	for range n {
		testkit.Recv(t, r.turns, "a turn of the wait loop")
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
