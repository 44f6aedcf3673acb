package redislock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/observe"
)

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
	srvs := redistest.StartN(t, 3)
	// The third node is stopped (SIGSTOP) after its go-redis client has
	// connections open to it: its calls then end at their context
	// deadline, its obtain attempts fail after the node timeout, and each
	// failed attempt's clean-up release hangs for the release timeout on
	// one of those connections (new connections would fail at once).
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
	if n := int(stopped.PoolStats().TotalConns); n < attempts+nodes.MaxCleanup {
		t.Fatalf("%d connections open to the node, want at least %d", n, attempts+nodes.MaxCleanup)
	}
	srvs[2].Pause()
	t.Cleanup(srvs[2].Resume)
	rdbs := []redis.UniversalClient{srvs[0].Client(nil), srvs[1].Client(nil), stopped}
	var failed cleanups
	c, err := redislock.NewQuorum(rdbs, redislock.WithObserver(&failed),
		redislock.WithNodeTimeout(50*time.Millisecond), redislock.WithReleaseTimeout(3*time.Second),
		// Batched calls are bounded by go-redis' ReadTimeout, not by their context.
		redislock.WithAutoPipeline(false))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, time.Minute)
	for i := range attempts {
		// Each grant is won on the two live nodes; the third node's
		// failure leaves a clean-up release pending on it.
		if _, err := c.Obtain(ctx, "bh:"+strconv.Itoa(i), 10*time.Second); err != nil {
			t.Fatalf("Obtain %d with clean-ups pending: %v", i, err)
		}
	}
	// The third node's replies come late, after each grant was returned;
	// once the cap of clean-ups in flight is reached, the rest are refused.
	eventually(t, 10*time.Second, "clean-ups beyond the cap refused", func() bool {
		return int(failed.busy.Load()) == attempts-nodes.MaxCleanup
	})
	// With the node's clean-up capacity taken, live calls still go through.
	l, err := c.Obtain(ctx, "bh:live", 10*time.Second)
	if err != nil {
		t.Fatalf("Obtain with the clean-up pool full: %v", err)
	}
	if l.Fence() <= 0 {
		t.Fatalf("fence %d", l.Fence())
	}
	// Close waits for the pending clean-ups, each bounded by the release
	// timeout, which reports them as failed.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := failed.busy.Load() + failed.other.Load(); int(n) < attempts {
		t.Fatalf("%d clean-ups reported failed after Close, want all %d", n, attempts)
	}
}
