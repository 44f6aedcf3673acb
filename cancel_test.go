package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A call whose context is done never returns a lock, on every path, and a
// call that never went out sends nothing and releases nothing.
func TestCancelledObtainNeverGrants(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	t.Run("lone", func(t *testing.T) {
		srv := redistest.Start(t)
		admin := srv.Client(nil)
		var cl cleanups
		c := newClient(t, srv.Client(nil), redislock.WithObserver(&cl))
		ctx := testkit.Context(t)
		warm, err := c.Obtain(ctx, "warm", time.Minute) // loads the scripts; a TTL no load outlasts
		require.NoError(t, err)
		_ = warm.Release(ctx)
		before := evalCalls(admin)
		for i := range 200 {
			l, err := c.Obtain(cancelled, "lone-"+strconv.Itoa(i), time.Minute)
			if !assert.Nil(t, l, "Obtain with a cancelled ctx") || !assert.ErrorIs(t, err, context.Canceled, "Obtain with a cancelled ctx") {
				break
			}
			m, err := c.ObtainMulti(cancelled, []string{"m-a" + strconv.Itoa(i), "m-b" + strconv.Itoa(i)}, time.Minute)
			if !assert.Nil(t, m, "ObtainMulti with a cancelled ctx") || !assert.ErrorIs(t, err, context.Canceled, "ObtainMulti with a cancelled ctx") {
				break
			}
			if err := c.Run(cancelled, "run-"+strconv.Itoa(i), time.Minute, func(context.Context, *redislock.Lock) error {
				return errors.New("fn ran")
			}); !assert.ErrorIs(t, err, context.Canceled, "Run with a cancelled ctx") {
				break
			}
		}
		_ = c.Close()
		assert.Equal(t, 0, evalCalls(admin)-before, "calls with a cancelled ctx sent scripts, want none")
		assert.Equal(t, int32(0), cl.busy.Load()+cl.other.Load(), "clean-ups reported failed for calls that never went out")
	})

	// Past 16 calls in flight, calls go through go-redis' auto-pipeliner,
	// which does not look at a call's context.
	t.Run("pipelined", func(t *testing.T) {
		srv := redistest.Start(t)
		admin := srv.Client(nil)
		var cl cleanups
		c := newClient(t, srv.Client(nil), redislock.WithObserver(&cl))
		ctx := testkit.Context(t)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 32 {
			wg.Go(func() {
				key := "busy-" + strconv.Itoa(w)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if l, err := c.Obtain(ctx, key, time.Minute); err == nil {
						_ = l.Release(ctx)
					}
				}
			})
		}
		granted := 0
		errsOf := map[string]string{}
		for i := range 2000 {
			// A ctx cancelled during the call, or before it.
			cctx, cancel := context.WithCancel(ctx)
			if i%2 == 0 {
				cancel()
			} else {
				time.AfterFunc(0, cancel)
			}
			l, err := c.Obtain(cctx, "pipe-"+strconv.Itoa(i), time.Minute)
			errsOf[redislock.LockKey("pipe-"+strconv.Itoa(i))] = fmt.Sprintf("%v %v", l != nil, err)
			if l != nil {
				if i%2 == 0 || errors.Is(err, context.Canceled) {
					granted++ // cancelled before the call: never a lock
				}
				_ = l.Release(ctx)
			}
			cancel()
		}
		close(stop)
		wg.Wait()
		_ = c.Close() // waits for the background clean-up
		require.True(t, redislock.Pipelined(c), "the auto-pipeliner was never used: the test exercised nothing")
		t.Logf("cleanups failed: busy %d, other %d", cl.busy.Load(), cl.other.Load())
		assert.LessOrEqual(t, granted, 0, "of 1000 Obtain calls with a cancelled ctx returned a lock")
		keys, err := admin.Keys(ctx, redislock.DefaultPrefix+"{pipe-*}").Result()
		require.NoError(t, err)
		for _, k := range keys {
			if held(ctx, admin, k) {
				assert.Fail(t, fmt.Sprintf("%s still held after Close: a cancelled Obtain's grant was not released: %s", k, errsOf[k]))
				break
			}
		}
	})

	t.Run("quorum", func(t *testing.T) {
		srvs := redistest.StartN(t, 3)
		var rdbs []redis.UniversalClient
		for _, s := range srvs {
			rdbs = append(rdbs, s.Client(nil))
		}
		var cl cleanups
		c, err := redislock.NewQuorum(rdbs, redislock.WithObserver(&cl))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		before := 0
		for _, s := range srvs {
			before += evalCalls(s.Client(nil))
		}
		for i := range 100 {
			l, err := c.Obtain(cancelled, "q-"+strconv.Itoa(i), time.Minute)
			if !assert.Nil(t, l, "quorum Obtain with a cancelled ctx") || !assert.ErrorIs(t, err, context.Canceled, "quorum Obtain with a cancelled ctx") {
				break
			}
		}
		_ = c.Close()
		after := 0
		for _, s := range srvs {
			after += evalCalls(s.Client(nil))
		}
		assert.Equal(t, before, after, "quorum calls with a cancelled ctx sent %d scripts, want none", after-before)
		assert.Equal(t, int32(0), cl.busy.Load()+cl.other.Load(), "clean-ups reported failed for calls that never went out")
	})

	// A waiter whose ctx ends just before the holder's release hands it the
	// lock: it returns no lock, and the lock does not stay taken.
	t.Run("waiting", func(t *testing.T) {
		srv := redistest.Start(t)
		admin := srv.Client(nil)
		c := newClient(t, srv.Client(nil))
		ctx := testkit.Context(t)
		for i := range 100 {
			key := "wait-" + strconv.Itoa(i)
			h, err := c.Obtain(ctx, key, time.Minute)
			require.NoError(t, err)
			wctx, cancel := context.WithCancel(ctx)
			type result struct {
				l   *redislock.Lock
				err error
			}
			done := make(chan result, 1)
			go func() {
				l, err := c.Obtain(wctx, key, time.Minute, redislock.WithRetry(redislock.LinearBackoff(time.Minute)))
				done <- result{l, err}
			}()
			require.Eventually(t, func() bool { n, ready := redislock.LocalWaiters(c, key); return n == 1 && ready }, 10*time.Second, 5*time.Millisecond, "the waiter waits")
			cancel()
			require.NoError(t, h.Release(ctx))
			r := <-done
			if !assert.Nil(t, r.l, "waiting Obtain with a cancelled ctx") || !assert.ErrorIs(t, r.err, context.Canceled, "waiting Obtain with a cancelled ctx") {
				_ = r.l.Release(ctx)
				break
			}
		}
		_ = c.Close()
		keys, err := admin.Keys(ctx, redislock.DefaultPrefix+"{wait-*}").Result()
		require.NoError(t, err)
		for _, k := range keys {
			if held(ctx, admin, k) {
				assert.Fail(t, fmt.Sprintf("%s still held after Close", k))
				break
			}
		}
	})
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
	ctx := testkit.Context(t)
	// The scripts are loaded: every call below is one EVALSHA.
	m, err := holderC.ObtainMulti(ctx, []string{"warm-a", "warm-b"}, time.Second)
	require.NoError(t, err)
	require.NoError(t, m.Release(ctx))
	for _, fair := range []bool{false, true} {
		l, err := holderC.Obtain(ctx, "warm", time.Second, redislock.WithFair(fair))
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
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
			require.NoError(t, err)
			defer held.Release(ctx)
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			hook := &scriptHook{at: 2, after: cancel}
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
				require.Nil(t, m, "ObtainMulti returned a lock after its ctx ended")
			} else {
				var l *redislock.Lock
				l, err = c.Obtain(wctx, key, time.Minute, retry, redislock.WithFair(tc.fair))
				require.Nil(t, l, "Obtain returned a lock after its ctx ended")
			}
			require.GreaterOrEqual(t, hook.calls.Load(), int32(2), "script calls: the ctx did not end the call it was meant to")
			require.ErrorIs(t, err, redislock.ErrNotObtained, "ctx ended during a wait's %s, want ErrNotObtained matching context.Canceled", tc.name)
			require.ErrorIs(t, err, context.Canceled, "ctx ended during a wait's %s, want ErrNotObtained matching context.Canceled", tc.name)
			require.False(t, !tc.multi && starts.n.Load() != 1, "%d WaitStart events for one wait", starts.n.Load())
		})
	}
}
