package redislock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/observe"
)

// atScript is a go-redis hook that runs at(ctx) before the n-th script call
// (EVAL, EVALSHA) of its client, and after(ctx) once that call returned.
type atScript struct {
	n      int32
	calls  atomic.Int32
	before func()
	after  func()
}

func (h *atScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *atScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := strings.ToLower(cmd.Name())
		if name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		hit := h.calls.Add(1) == h.n
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

func (h *atScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
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

// await waits for n more WaitStart events (failing t after 10 s).
func (w *waitStarts) await(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-w.ch:
		case <-time.After(10 * time.Second):
			t.Fatal("no WaitStart event")
		}
	}
}

// A ctx that ends an Obtain or ObtainMulti once it has waited for a held
// lock ends a wait: the error matches ErrNotObtained and the ctx's error,
// whichever call the ctx cut short (the recheck made once subscribed, a
// later attempt) and also when that call made a grant (given back). Fair
// waits report their start to the observers like any other.
func TestCtxEndingAWaitIsContention(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holderC := newClient(t, srv.Client(nil))
	ctx := ctxT(t, 30*time.Second)
	// The scripts are loaded: every call below is one EVALSHA.
	if m, err := holderC.ObtainMulti(ctx, []string{"warm-a", "warm-b"}, time.Second); err != nil {
		t.Fatal(err)
	} else if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, fair := range []bool{false, true} {
		if l, err := holderC.Obtain(ctx, "warm", time.Second, redislock.WithFair(fair)); err != nil {
			t.Fatal(err)
		} else if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		multi  bool
		notify bool
		fair   bool
		grant  bool // the cut call makes a grant: the holder is gone by then
	}{
		// Script call 1 is the first attempt, call 2 the recheck once
		// subscribed (notified) or the second attempt (polling).
		{name: "recheck", notify: true},
		{name: "fair recheck", notify: true, fair: true},
		{name: "second attempt", notify: false},
		{name: "granted recheck", notify: true, grant: true},
		{name: "multi recheck", multi: true, notify: true},
		{name: "multi second attempt", multi: true, notify: false},
		{name: "multi granted attempt", multi: true, notify: false, grant: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.ReplaceAll(t.Name(), "/", "-")
			held, err := holderC.Obtain(ctx, key, time.Minute, redislock.WithFair(tc.fair))
			if err != nil {
				t.Fatal(err)
			}
			defer held.Release(ctx)
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			hook := &atScript{n: 2, after: cancel}
			if tc.grant {
				hook.before = func() { _ = held.Release(ctx) }
			} else {
				hook.before = cancel
			}
			rdb := srv.Client(nil)
			rdb.AddHook(hook)
			starts := newWaitStarts()
			c := newClient(t, rdb, redislock.WithNotify(tc.notify), redislock.WithObserver(starts))
			retry := redislock.WithRetry(redislock.LinearBackoff(time.Millisecond))
			if tc.multi {
				var m *redislock.MultiLock
				m, err = c.ObtainMulti(wctx, []string{key + "-a", key}, time.Minute, retry)
				if m != nil {
					t.Fatal("ObtainMulti returned a lock after its ctx ended")
				}
			} else {
				var l *redislock.Lock
				l, err = c.Obtain(wctx, key, time.Minute, retry, redislock.WithFair(tc.fair))
				if l != nil {
					t.Fatal("Obtain returned a lock after its ctx ended")
				}
			}
			if hook.calls.Load() < 2 {
				t.Fatalf("%d script calls: the ctx did not end the call it was meant to", hook.calls.Load())
			}
			if !errors.Is(err, redislock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
				t.Fatalf("ctx ended during a wait's %s: %v, want ErrNotObtained matching context.Canceled", tc.name, err)
			}
			if !tc.multi && starts.n.Load() != 1 {
				t.Fatalf("%d WaitStart events for one wait", starts.n.Load())
			}
		})
	}
}
