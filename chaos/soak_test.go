package chaos

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
)

const soakCycles = 10000

// connectedClients counts the server's client connections with CLIENT
// LIST, less the connection that asks.
func connectedClients(t *testing.T, n *node) int {
	t.Helper()
	v, err := n.srv.Do("CLIENT", "LIST")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(strings.TrimSpace(v.(string)), "\n") // lines - 1
}

// settle waits (bounded) for the goroutine count to come down to want.
func settle(want int) int {
	got := runtime.NumGoroutine()
	for i := 0; i < 100 && got > want; i++ {
		time.Sleep(20 * time.Millisecond)
		got = runtime.NumGoroutine()
	}
	return got
}

// A soak of 10,000 Obtain / Run / cancelled-Obtain cycles on 16 contended
// keys while the nemesis resets connections, adds latency and pauses the
// server. Claim: no goroutine and no connection growth: after Close, the
// goroutine count is back to where it was, and the server holds no more
// connections than the client's pool allows.
func TestSoakNoLeaks(t *testing.T) {
	needRedis(t)
	n := startNodes(t, 1, debugArgs...)[0]
	h := NewHistory()
	n.rdb.Close() // the soak counts its own client's connections only
	time.Sleep(50 * time.Millisecond)
	base := runtime.NumGoroutine()
	baseConns := connectedClients(t, n)
	rdb := redis.NewClient(ClientOptions(n.proxy.Addr()))
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
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	close(unexpected)
	for err := range unexpected {
		t.Errorf("unexpected error: %v", err)
	}
	pool := ClientOptions("").PoolSize
	openConns := connectedClients(t, n) - baseConns
	if openConns > pool {
		t.Errorf("server connections grew past the pool: %d (pool %d)", openConns, pool)
	}
	_ = rdb.Close()
	time.Sleep(50 * time.Millisecond)
	after := settle(base)
	afterConns := connectedClients(t, n)
	t.Logf("soak: %d cycles (%d grants, %d runs, %d cancelled, %d other errors), %d faults; goroutines %d -> %d; server connections %d -> %d (at most %d open during the soak's end, pool size %d)",
		done.Load(), grants.Load(), runs.Load(), cancelled.Load(), errs.Load(), faults, base, after, baseConns, afterConns, openConns, pool)
	summary.soak.Add(done.Load())
	summary.faults.Add(int64(faults))
	summary.mu.Lock()
	summary.lines = append(summary.lines, fmt.Sprintf("%s cycles=%d goroutines=%d->%d connections=%d->%d", t.Name(), done.Load(), base, after, baseConns, afterConns))
	summary.mu.Unlock()
	if done.Load() < soakCycles {
		t.Errorf("only %d of %d cycles ran within the bound", done.Load(), soakCycles)
	}
	if after > base {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines grew: %d -> %d\n%s", base, after, buf[:runtime.Stack(buf, true)])
	}
	if afterConns > baseConns {
		t.Errorf("server connections left open after Close: %d -> %d", baseConns, afterConns)
	}
}
