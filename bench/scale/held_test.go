package scale

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redisproc"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
)

const (
	heldTTL    = 10 * time.Second
	heldRounds = 3
	lossKeys   = 100 // deleted behind their holders' backs
)

// BenchmarkHeld100k holds 100,000 locks (TTL 10 s, renewed every TTL/3)
// through one Client on one local redis-server for three renewal rounds,
// and reports per run (use -benchtime=1x):
//
//	goroutines     the most goroutines beyond those before the locks were held
//	heap-B/lock    heap per held lock beyond the caller's own Lock values
//	               (measured with the server paused: no renewal runs meanwhile)
//	calls/round    batch_refresh calls per renewal round
//	locks/call     renewals per call
//	lag-p99-ms     99th percentile of (renewal confirmed - renewal due)
//	lag-p99/TTL    the same, as a share of the TTL (target <= 0.1)
//	loss-max-ms    the longest time from a lock's deletion behind its
//	               holder's back to the holder being told (target <= interval)
//
// /keep holds with the Lock's Keep (the renewer's cost alone), /hold with
// lease.Hold (adds the Held and its context).
func BenchmarkHeld100k(b *testing.B) {
	n := 100_000
	if s := os.Getenv("REDISLOCK_SCALE_LOCKS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < lossKeys {
			b.Fatalf("REDISLOCK_SCALE_LOCKS=%q", s)
		}
	}
	for _, mode := range []string{"keep", "hold"} {
		b.Run(mode, func(b *testing.B) { benchHeld(b, n, mode == "hold") })
	}
}

func benchHeld(b *testing.B, n int, hold bool) {
	srv, err := redisproc.Start(redisproc.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
	defer rdb.Close()
	calls := &callCounter{}
	rdb.AddHook(calls)
	lag := &lagObserver{}
	c := redislock.New(rdb, redislock.WithObserver(lag))
	defer c.Close()
	ctx := context.Background()

	interval := heldTTL / 3
	drift := lease.Drift(heldTTL, lease.DefaultDriftFactor)
	locks := obtainAll(b, c, n)
	// The caller's own: the locks, the loss callbacks and their clocks.
	lag.byKey = make(map[string]*redislock.Lock, n)
	for _, l := range locks {
		lag.byKey[l.Key()] = l
	}
	lag.renewal = heldTTL - drift - interval
	lostAt := make([]atomic.Int64, n)
	losts := make([]func(error), n)
	for i := range losts {
		losts[i] = func(error) { lostAt[i].Store(time.Now().UnixNano()) }
	}
	stops := make([]func(), n)
	helds := make([]*lease.Held, n)

	// Renewals already due (obtaining took longer than an interval) wait
	// while the server is paused: they allocate nothing meanwhile.
	srv.Pause()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	baseGoroutines := runtime.NumGoroutine()
	var peak atomic.Int64 // sampled at each renewal call in the measured rounds
	calls.sample = func() {
		if g := int64(runtime.NumGoroutine() - baseGoroutines); lag.measure.Load() && g > peak.Load() {
			peak.Store(g)
		}
	}
	b.ResetTimer()
	for i, l := range locks {
		if hold {
			h, err := lease.Hold(ctx, l, heldTTL)
			if err != nil {
				b.Fatal(err)
			}
			helds[i] = h
		} else {
			stops[i] = l.Keep(heldTTL, interval, losts[i])
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	srv.Resume()
	perLock := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
	step := n / lossKeys
	if hold { // the caller watches the locks it will delete
		for i := 0; i < n; i += step {
			context.AfterFunc(helds[i].Context(), func() { losts[i](nil) })
		}
	}

	time.Sleep(interval + interval/2) // the first round: renewals fall into step
	calls.reset()
	lag.measure.Store(true)
	time.Sleep(interval / 2)
	deleted := time.Now()
	pipe := rdb.Pipeline()
	for i := range lossKeys {
		pipe.Del(ctx, "redislock:{"+locks[i*step].Key()+"}")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	time.Sleep(heldRounds*interval - interval/2)
	lag.measure.Store(false)
	b.StopTimer()

	var worst time.Duration
	for i := range lossKeys {
		at := lostAt[i*step].Load()
		if at == 0 {
			b.Fatalf("the loss of deleted lock %d was not reported", i*step)
		}
		worst = max(worst, time.Unix(0, at).Sub(deleted))
	}
	for i := range n {
		if i%step != 0 && lostAt[i].Load() != 0 {
			b.Fatalf("lock %d reported lost", i)
		}
	}
	p99 := lag.p99()
	b.ReportMetric(float64(peak.Load()), "goroutines")
	b.ReportMetric(perLock, "heap-B/lock")
	b.ReportMetric(float64(calls.calls.Load())/heldRounds, "calls/round")
	b.ReportMetric(float64(calls.keys.Load())/float64(max(calls.calls.Load(), 1)), "locks/call")
	b.ReportMetric(float64(p99)/float64(time.Millisecond), "lag-p99-ms")
	b.ReportMetric(float64(p99)/float64(heldTTL), "lag-p99/TTL")
	b.ReportMetric(float64(worst)/float64(time.Millisecond), "loss-max-ms")
	for i := range n {
		if hold {
			_ = helds[i].Release(ctx)
		} else {
			stops[i]()
		}
	}
}

// obtainAll obtains n locks with 64 workers.
func obtainAll(b *testing.B, c *redislock.Client, n int) []*redislock.Lock {
	locks := make([]*redislock.Lock, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				l, err := c.Obtain(context.Background(), "held-"+strconv.Itoa(i), heldTTL)
				if err != nil {
					failed.Store(err)
					return
				}
				locks[i] = l
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return locks
}

// lagObserver records, for each renewal in the measured rounds, how late
// it was confirmed: the renewal of a lock is due an interval after the
// request that confirmed its current validity began.
type lagObserver struct {
	byKey   map[string]*redislock.Lock
	renewal time.Duration // ValidUntil - due: TTL - drift - interval
	measure atomic.Bool
	mu      sync.Mutex
	lags    []time.Duration
}

func (o *lagObserver) RefreshStart(ctx context.Context, _ observe.RefreshStartEvent) context.Context {
	return ctx
}

func (o *lagObserver) RefreshDone(_ context.Context, e observe.RefreshDoneEvent) {
	if !e.Renewal || e.Err != nil || !o.measure.Load() {
		return
	}
	l := o.byKey[e.Key]
	// Called before the renewal is applied: ValidUntil is the previous one.
	lag := max(time.Since(l.ValidUntil().Add(-o.renewal)), 0)
	o.mu.Lock()
	o.lags = append(o.lags, lag)
	o.mu.Unlock()
}

func (o *lagObserver) p99() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.lags) == 0 {
		return 0
	}
	slices.Sort(o.lags)
	return o.lags[len(o.lags)*99/100]
}

// callCounter is a go-redis hook that counts batch_refresh.lua calls.
type callCounter struct {
	calls, keys atomic.Int64
	sample      func() // called on each call, if set
}

func (c *callCounter) reset() { c.calls.Store(0); c.keys.Store(0) }

func (c *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *callCounter) count(cmd redis.Cmder) {
	n, ok := script.BatchRefreshKeys(cmd)
	if !ok {
		return
	}
	c.calls.Add(1)
	c.keys.Add(int64(n))
	if c.sample != nil {
		c.sample()
	}
}
