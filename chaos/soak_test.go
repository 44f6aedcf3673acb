package chaos

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/redislock-go/redislock"
)

const soakCycles = 10000

// proxyGoroutines are the toxiproxy functions whose goroutines belong to a
// proxy link, not to the library: a link ends on its own schedule after
// the client closed its side.
var proxyGoroutines = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
	goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).RemoveToxic"),
}

// A soak of 10,000 Obtain / Run / cancelled-Obtain cycles on 16 contended
// keys while the nemesis resets connections, adds latency and pauses the
// server. Claim: no goroutine and no connection growth: the go-redis pool
// holds no more connections than its size, Close leaves no subscription
// open, and after Close no goroutine of the soak's is left. (toxiproxy's
// own goroutines are not counted: a proxy link may outlive the client's
// side of it, until the proxy stops.)
func TestSoakNoLeaks(t *testing.T) {
	needRedis(t)
	n := startNodes(t, 1, debugArgs...)[0]
	h := NewHistory()
	before := goleak.IgnoreCurrent()
	base := runtime.NumGoroutine()
	o := ClientOptions(n.proxy.Addr())
	rdb := redis.NewClient(o)
	c := redislock.New(rdb)

	ctx, cancel := context.WithCancel(context.Background())
	var faults int
	nemDone := make(chan struct{})
	go func() {
		defer close(nemDone)
		faults = Nemesis{Gap: 200 * time.Millisecond, Hold: 30 * time.Millisecond, Seed: 31, Faults: []Fault{
			ResetPeer(n.proxy),
			Latency(n.proxy, 5, 2),
			ClientPause("n0", n.srv, 30*time.Millisecond),
		}}.Run(ctx, h)
	}()

	var done, grants, runs, cancelled, errs atomic.Int64
	unexpected := make(chan error, 16)
	var wg sync.WaitGroup
	const workers = 4
	deadline := time.Now().Add(60 * time.Second) // a bound, not a timing assertion
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < soakCycles/workers && time.Now().Before(deadline); i++ {
				key := fmt.Sprintf("soak-%d", (w*7+i)%16)
				switch i % 3 {
				case 0: // Obtain + Release
					l, err := c.Obtain(context.Background(), key, time.Second)
					if err == nil {
						grants.Add(1)
						_ = l.Release(context.Background())
					} else {
						errs.Add(1)
					}
				case 1: // Run, with fn returning at once
					err := c.Run(context.Background(), key, time.Second, func(context.Context, *redislock.Lock) error { return nil })
					if err == nil {
						runs.Add(1)
					} else {
						errs.Add(1)
					}
				case 2: // Obtain cancelled in flight
					cctx, ccancel := context.WithTimeout(context.Background(), 200*time.Microsecond)
					l, err := c.Obtain(cctx, key, time.Second, redislock.WithRetry(redislock.LinearBackoff(time.Millisecond)))
					ccancel()
					if err == nil {
						_ = l.Release(context.Background())
					} else if errors.Is(err, redislock.ErrInvalidArgument) {
						select {
						case unexpected <- err:
						default:
						}
					} else {
						cancelled.Add(1)
					}
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	cancel()
	<-nemDone
	assert.NoError(t, c.Close(), "Close")
	close(unexpected)
	for err := range unexpected {
		t.Errorf("unexpected error: %v", err)
	}
	pool := o.PoolSize
	stats := rdb.PoolStats() // the library is closed; the pool is not yet
	_ = rdb.Close()
	leak := goleak.Find(append([]goleak.Option{before}, proxyGoroutines...)...)
	t.Logf("soak: %d cycles (%d grants, %d runs, %d cancelled, %d other errors), %d faults; goroutines %d -> %d (toxiproxy's included); at the end the pool held %d connections (pool size %d), %d subscriptions active",
		done.Load(), grants.Load(), runs.Load(), cancelled.Load(), errs.Load(), faults, base, runtime.NumGoroutine(), stats.TotalConns, pool, stats.PubSubStats.Active)
	summary.soak.Add(done.Load())
	summary.faults.Add(int64(faults))
	summary.mu.Lock()
	summary.lines = append(summary.lines, fmt.Sprintf("%s cycles=%d pool_connections=%d subscriptions=%d", t.Name(), done.Load(), stats.TotalConns, stats.PubSubStats.Active))
	summary.mu.Unlock()
	assert.GreaterOrEqual(t, done.Load(), int64(soakCycles), "only %d of %d cycles ran within the bound", done.Load(), soakCycles)
	assert.LessOrEqual(t, int(stats.TotalConns), pool, "client connections grew past the pool: %d (pool %d)", stats.TotalConns, pool)
	assert.Equal(t, uint32(0), stats.PubSubStats.Active, "subscriptions left open after Close: %d", stats.PubSubStats.Active)
	assert.NoError(t, leak, "goroutines left after Close")
}
