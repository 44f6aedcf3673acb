package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/observe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A typed nil (a nil *redis.Client in a non-nil interface) is a nil client:
// every call of New's Client is ErrInvalidArgument, NewQuorum refuses it,
// and nothing panics.
func TestTypedNilClients(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	good := []redis.UniversalClient{srv.Client(nil), srv.Client(nil)}
	ctx := testkit.Context(t)
	fn := func(context.Context, *redislock.Lock) error { return nil }
	fnMulti := func(context.Context, *redislock.MultiLock) error { return nil }
	for name, rdb := range map[string]redis.UniversalClient{
		"client":  (*redis.Client)(nil),
		"cluster": (*redis.ClusterClient)(nil),
		"ring":    (*redis.Ring)(nil),
	} {
		t.Run(name, func(t *testing.T) {
			c := redislock.New(rdb)
			calls := map[string]func() error{
				"Obtain":      func() error { _, err := c.Obtain(ctx, "k", time.Second); return err },
				"ObtainMulti": func() error { _, err := c.ObtainMulti(ctx, []string{"a", "b"}, time.Second); return err },
				"Run":         func() error { return c.Run(ctx, "k", time.Second, fn) },
				"RunMulti":    func() error { return c.RunMulti(ctx, []string{"a", "b"}, time.Second, fnMulti) },
				"Inspect":     func() error { _, err := c.Inspect(ctx, "k"); return err },
				"Store.Put":   func() error { return c.Store().Put(ctx, "k", []byte("v"), 1, 0) },
				"Store.Get":   func() error { _, err := c.Store().Get(ctx, "k"); return err },
				"Locker":      func() error { _, err := c.Locker().Obtain(ctx, "k", time.Second); return err },
				"NewQuorum": func() error {
					_, err := redislock.NewQuorum([]redis.UniversalClient{good[0], rdb, good[1]})
					return err
				},
				"FencedSet": func() error { return redislock.FencedSet(ctx, rdb, "r", "v", 1, 0) },
				"FencedGet": func() error { _, _, err := redislock.FencedGet(ctx, rdb, "r"); return err },
			}
			for call, f := range calls {
				t.Run(call, func(t *testing.T) {
					require.ErrorIs(t, noPanic(f), redislock.ErrInvalidArgument, "got, want ErrInvalidArgument")
				})
			}
			require.NoError(t, noPanic(c.Close), "Close")
		})
	}
}

// noPanic runs f and returns its error, or the panic as an error.
func noPanic(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errors.New("panic: " + strings.Split(strings.TrimSpace(toString(p)), "\n")[0])
		}
	}()
	return f()
}

func toString(p any) string {
	if e, ok := p.(error); ok {
		return e.Error()
	}
	if s, ok := p.(string); ok {
		return s
	}
	return "non-error panic"
}

// An option the Client's mode cannot honour is refused by the constructor,
// not by every call later.
func TestConstructorRefusesWhatTheModeCannotHonour(t *testing.T) {
	t.Parallel()
	var rdbs []redis.UniversalClient
	for _, s := range redistest.StartN(t, 3) {
		rdbs = append(rdbs, s.Client(nil))
	}
	for name, opt := range map[string]redislock.Option{
		"WithFair":     redislock.WithFair(true),
		"WithReplicas": redislock.WithReplicas(1, time.Second),
	} {
		c, err := redislock.NewQuorum(rdbs, opt)
		if !errors.Is(err, redislock.ErrInvalidArgument) || c != nil {
			if c != nil {
				_ = c.Close()
			}
			assert.Fail(t, fmt.Sprintf("NewQuorum(%s) = %v, %v, want ErrInvalidArgument", name, c, err))
		}
	}
}

// cleanups counts failed clean-ups by cause.
type cleanups struct{ busy, other atomic.Int32 }

func (c *cleanups) CleanupFailed(_ context.Context, e observe.CleanupEvent) {
	if errors.Is(e.Err, nodes.ErrBusy) {
		c.busy.Add(1)
	} else {
		c.other.Add(1)
	}
}

// Live calls go through while clean-up releases to a blackholed node are
// pending: the clean-up has a bounded pool of its own, and a node with as
// many clean-up calls in flight as it may have refuses more (reported to
// the observers) instead of queueing them or taking workers from live
// calls.
func TestCleanupToBlackholedNodeDoesNotBlockLiveCalls(t *testing.T) {
	t.Parallel()
	srvs := redistest.StartN(t, 3)
	// The third node is stopped (SIGSTOP) after its go-redis client has
	// connections open to it: its calls then end at their context
	// deadline, its obtain calls fail after the node timeout, and each
	// clean-up release there hangs for the release timeout on one of
	// those connections (new connections would fail at once).
	const warm = 2*nodes.MaxCleanup + 100
	stopped := srvs[2].Client(func(o *redis.Options) {
		o.ContextTimeoutEnabled, o.MaxRetries, o.PoolSize, o.ReadTimeout = true, -1, warm+50, time.Minute
	})
	var wg sync.WaitGroup
	for range warm {
		wg.Go(func() { _ = stopped.Do(context.Background(), "BLPOP", "warm", "0.02").Err() })
	}
	wg.Wait()
	attempts := nodes.MaxCleanup + 20
	require.GreaterOrEqual(t, int(stopped.PoolStats().TotalConns), attempts+nodes.MaxCleanup, "connections open to the node, want at least %d", attempts+nodes.MaxCleanup)
	srvs[2].Pause()
	t.Cleanup(srvs[2].Resume)
	rdbs := []redis.UniversalClient{srvs[0].Client(nil), srvs[1].Client(nil), stopped}
	var failed cleanups
	c, err := redislock.NewQuorum(rdbs, redislock.WithObserver(&failed),
		// A node timeout the live nodes meet on a loaded machine, and far
		// above the time between an Obtain and its Release here; a
		// release timeout that keeps the clean-ups pending while all the
		// locks are taken and released.
		redislock.WithNodeTimeout(5*time.Second), redislock.WithReleaseTimeout(10*time.Second),
		// Batched calls are bounded by go-redis' ReadTimeout, not by their context.
		redislock.WithAutoPipeline(false))
	require.NoError(t, err)
	ctx := testkit.Context(t)
	for i := range attempts {
		// Each grant is won on the two live nodes and released at once,
		// while the third node's obtain is still out: that node is
		// released when its answer (a failure, at the node timeout) comes,
		// by a clean-up release that hangs there.
		l, err := c.Obtain(ctx, "bh:"+strconv.Itoa(i), 10*time.Second)
		require.NoError(t, err, "Obtain %d with clean-ups pending", i)
		require.NoError(t, l.Release(ctx), "Release %d with clean-ups pending", i)
	}
	// Once the cap of clean-ups in flight is reached, the rest are refused.
	require.Eventually(t, func() bool {
		return int(failed.busy.Load()) == attempts-nodes.MaxCleanup
	}, 30*time.Second, 5*time.Millisecond, "clean-ups beyond the cap refused")
	// With the node's clean-up capacity taken, live calls still go through.
	l, err := c.Obtain(ctx, "bh:live", 10*time.Second)
	require.NoError(t, err, "Obtain with the clean-up pool full")
	require.Greater(t, l.Fence(), int64(0), "fence")
	// Close waits for the pending clean-ups, each bounded by the release
	// timeout, which reports them as failed.
	require.NoError(t, c.Close())
	n := failed.busy.Load() + failed.other.Load()
	require.GreaterOrEqual(t, int(n), attempts, "%d clean-ups reported failed after Close, want all %d", n, attempts)
}
