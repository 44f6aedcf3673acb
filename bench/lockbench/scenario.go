package lockbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// Metric names used in Result.Metrics.
const (
	MOpsPerSec      = "ops_per_sec"        // uncontended: Obtain+Release pairs/s; hotkey: grants/s
	MLatP50         = "lat_p50_us"         // uncontended: Obtain+Release pair latency
	MLatP99         = "lat_p99_us"         //
	MLatMax         = "lat_max_us"         //
	MAllocsPerOp    = "allocs_per_op"      // heap allocations per pair/grant, whole process
	MBytesPerOp     = "bytes_per_op"       //
	MCallsPerOp     = "redis_calls_per_op" // INFO commandstats delta per op, all nodes, incl. commands inside scripts
	MSentPerOp      = "sent_per_op"        // commands the client sent per op (round trips incl. EVALSHA fallbacks)
	MHandoffsPerSec = "handoffs_per_sec"   // grants to a different worker than the previous holder
	MHandoffP50     = "handoff_p50_us"     // release -> next grant by another worker
	MHandoffP99     = "handoff_p99_us"
	MWaitP50        = "wait_p50_us" // from wanting the lock to holding it
	MWaitP99        = "wait_p99_us"
	MWaitMax        = "wait_max_us"
	MFairness       = "fairness"        // min/max grants per worker (1 = perfectly even)
	MGrantsMin      = "grants_min"      //
	MGrantsMax      = "grants_max"      //
	MGaveUp         = "gave_up_per_sec" // Obtain calls that returned busy (worker keeps trying)
	MErrors         = "errors"          // other errors (not contention)
	MRenewCalls     = "renew_calls_per_sec"
	MRenewSent      = "renew_sent_per_sec"
	MGoroutines     = "goroutines_per_lock" // extra goroutines per held lock, beyond the caller's
	MHeapPerLock    = "heap_bytes_per_lock"
	MLost           = "lost"                // renew: holds that ended before the run did, found gone or failed
	MLostExpired    = "lost_expired"        // renew: holds whose lease ran out before a renewal got through (a stalled machine)
	MKeysLeft       = "keys_left_per_lock"  // uncontended: keys left on the nodes per released lock and node
	MKeysNoTTL      = "keys_without_ttl"    // uncontended: of them, keys without expiry
	MRedisCPUPerOp  = "redis_cpu_us_per_op" // the servers' CPU (INFO cpu, user + system) per op, all nodes
	MUnfinished     = "waits_unfinished"    // hotkey: workers still waiting at the window's end (their wait so far is counted)
	MIdle           = "idle"                // hotkey: 1 when the repetition granted nothing (its medians leave it out)
	// MCmdCalls and MCmdUsec, followed by a command's name as INFO
	// commandstats spells it (evalsha, set, client|tracking...), are that
	// command's calls per op and µs per call, all nodes.
	MCmdCalls = "cmd_calls_per_op:"
	MCmdUsec  = "cmd_usec_per_call:"
)

var errSkip = errors.New("skip")

// snapshot is the process and server state at a window edge.
type snapshot struct {
	at      time.Time
	mallocs uint64
	bytes   uint64
	calls   int64
	sent    int64
	server  serverStats
}

func (t *target) snap(ctx context.Context, nodes int) snapshot {
	var ms runtime.MemStats
	st := t.serverStats(ctx, nodes)
	s := snapshot{calls: st.calls, sent: t.sent.Load(), server: st}
	runtime.ReadMemStats(&ms)
	s.mallocs, s.bytes, s.at = ms.Mallocs, ms.TotalAlloc, time.Now()
	return s
}

// serverMetrics are the servers' costs per op between two snapshots: CPU
// time, and per command its calls per op and µs per call (MCmdCalls,
// MCmdUsec).
func serverMetrics(m map[string]float64, s0, s1 snapshot, ops float64) map[string]float64 {
	if s0.server.cpu >= 0 && s1.server.cpu >= 0 && ops > 0 {
		m[MRedisCPUPerOp] = (s1.server.cpu - s0.server.cpu) / ops
	}
	for cmd, b := range s1.server.cmds {
		a := s0.server.cmds[cmd]
		if n := b.calls - a.calls; n > 0 && ops > 0 {
			m[MCmdCalls+cmd] = float64(n) / ops
			m[MCmdUsec+cmd] = float64(b.usec-a.usec) / float64(n)
		}
	}
	return m
}

func perOp(a, b int64, ops float64) float64 {
	if a < 0 || b < 0 || ops == 0 {
		return math.NaN()
	}
	return float64(b-a) / ops
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

const (
	phaseWarm int32 = iota
	phaseMeasure
	phaseStop
)

// window runs the warm-up and the measured window while workers run, and
// returns the snapshots at both edges. It stops the workers at the end;
// atEnd, if not nil, is called at the end of the window, before they stop.
func window(ctx context.Context, cfg *Config, t *target, nodes int, phase *atomic.Int32, atEnd func(time.Time)) (snapshot, snapshot, error) {
	defer phase.Store(phaseStop)
	if err := sleepCtx(ctx, cfg.Warmup); err != nil {
		return snapshot{}, snapshot{}, err
	}
	s0 := t.snap(ctx, nodes)
	phase.Store(phaseMeasure)
	if err := sleepCtx(ctx, cfg.Duration); err != nil {
		return snapshot{}, snapshot{}, err
	}
	s1 := t.snap(ctx, nodes)
	if atEnd != nil {
		atEnd(s1.at)
	}
	return s0, s1, nil
}

// runUncontended: each worker takes and gives back its own key in a loop.
func runUncontended(ctx context.Context, cfg *Config, t *target, lk Locker, workers, nodes int, runID string, f *failures) (map[string]float64, error) {
	var phase atomic.Int32
	hists := make([]hist, workers)
	ops := make([]int64, workers)
	released := make([]int64, workers) // pairs released, warm-up included
	var errs atomic.Int64
	var wg crew
	for w := range workers {
		wg.Go(func() {
			defer f.catch()
			key := fmt.Sprintf("lockbench:%s:u:%d", runID, w)
			buf := []byte(key + ":")
			h := &hists[w]
			for i := 0; phase.Load() != phaseStop && ctx.Err() == nil; i++ {
				if cfg.FreshKeys {
					// One allocation per pair, the same for every library.
					key = string(strconv.AppendInt(buf, int64(i), 10))
				}
				start := time.Now()
				l, err := lk.Obtain(ctx, key, cfg.TTL)
				if err == nil {
					err = l.Release(ctx)
					if err == nil {
						released[w]++
					}
				}
				d := time.Since(start)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
						_ = sleepCtx(ctx, time.Millisecond)
					}
					continue
				}
				if phase.Load() == phaseMeasure {
					h.record(d)
					ops[w]++
				}
			}
		})
	}
	s0, s1, err := window(ctx, cfg, t, nodes, &phase, nil)
	late, serr := f.stop(&wg)
	if err = errors.Join(err, serr); err != nil {
		return nil, err
	}
	var all hist
	var n, locks int64
	for w := range workers {
		all.merge(&hists[w])
		n += ops[w]
		if cfg.FreshKeys {
			locks += released[w]
		} else if released[w] > 0 {
			locks++
		}
	}
	left, noTTL := t.keysLeft(ctx, nodes, "*lockbench:"+runID+":u:*")
	secs := s1.at.Sub(s0.at).Seconds()
	return serverMetrics(map[string]float64{
		MKeysLeft:    perOp(0, left, float64(locks*int64(nodes))),
		MKeysNoTTL:   float64(noTTL),
		MOpsPerSec:   float64(n) / secs,
		MLatP50:      all.at(0.5),
		MLatP99:      all.at(0.99),
		MLatMax:      us(all.max),
		MAllocsPerOp: perOp(int64(s0.mallocs), int64(s1.mallocs), float64(n)),
		MBytesPerOp:  perOp(int64(s0.bytes), int64(s1.bytes), float64(n)),
		MCallsPerOp:  perOp(s0.calls, s1.calls, float64(n)),
		MSentPerOp:   perOp(s0.sent, s1.sent, float64(n)),
		MErrors:      float64(errs.Load()),
		MStalled:     float64(late),
	}, s0, s1, float64(n)), nil
}

// hotState is the shared record of who holds the hot key.
type hotState struct {
	mu          sync.Mutex
	lastHolder  int
	lastRelease time.Time
	handoffs    int64
	handoff     hist
}

// runHotkey: workers contend on one key; each grant is held for cfg.Hold,
// then released, then the worker thinks for cfg.Think and wants it again.
func runHotkey(ctx context.Context, cfg *Config, t *target, lk Locker, workers, nodes int, runID string, f *failures) (map[string]float64, error) {
	var phase atomic.Int32
	key := "lockbench:" + runID + ":hot"
	waits := make([]hist, workers)
	grants := make([]int64, workers)
	// waiting[w] is when worker w began to want the lock (UnixNano), 0
	// while it holds it: at the window's end, the waits still going on
	// count as long as they have lasted, so that a worker that never got
	// the lock (or a repetition that granted nothing) is not left out.
	waiting := make([]atomic.Int64, workers)
	var errs, gaveUp atomic.Int64
	st := &hotState{lastHolder: -1}
	var wg crew
	for w := range workers {
		wg.Go(func() {
			defer f.catch()
			wait := &waits[w]
			want := time.Now()
			waiting[w].Store(want.UnixNano())
			for phase.Load() != phaseStop && ctx.Err() == nil {
				octx, cancel := context.WithTimeout(ctx, cfg.WaitTimeout)
				l, err := lk.Obtain(octx, key, cfg.TTL)
				cancel()
				if err != nil {
					if ctx.Err() != nil || phase.Load() == phaseStop {
						return
					}
					if errors.Is(err, ErrBusy) {
						if phase.Load() == phaseMeasure {
							gaveUp.Add(1)
						}
					} else {
						errs.Add(1)
						_ = sleepCtx(ctx, time.Millisecond)
					}
					continue
				}
				got := time.Now()
				waiting[w].Store(0)
				measuring := phase.Load() == phaseMeasure
				st.mu.Lock()
				if st.lastHolder >= 0 && st.lastHolder != w && measuring {
					st.handoffs++
					st.handoff.record(got.Sub(st.lastRelease))
				}
				st.lastHolder = w
				st.mu.Unlock()
				if measuring {
					wait.record(got.Sub(want))
					grants[w]++
				}
				_ = sleepCtx(ctx, cfg.Hold)
				st.mu.Lock()
				st.lastRelease = time.Now() // the release is at or after this instant
				st.mu.Unlock()
				if err := l.Release(ctx); err != nil && ctx.Err() == nil {
					errs.Add(1)
				}
				_ = sleepCtx(ctx, cfg.Think)
				want = time.Now()
				waiting[w].Store(want.UnixNano())
			}
		})
	}
	var unfinished hist
	s0, s1, err := window(ctx, cfg, t, nodes, &phase, func(end time.Time) {
		for w := range waiting {
			if since := waiting[w].Load(); since != 0 {
				unfinished.record(end.Sub(time.Unix(0, since)))
			}
		}
	})
	late, serr := f.stop(&wg)
	if err = errors.Join(err, serr); err != nil {
		return nil, err
	}
	all := unfinished
	var n int64
	gmin, gmax := int64(math.MaxInt64), int64(0)
	for w := range workers {
		all.merge(&waits[w])
		n += grants[w]
		gmin, gmax = min(gmin, grants[w]), max(gmax, grants[w])
	}
	secs := s1.at.Sub(s0.at).Seconds()
	fair, idle := math.NaN(), 1.0
	if gmax > 0 {
		fair, idle = float64(gmin)/float64(gmax), 0
	}
	return serverMetrics(map[string]float64{
		MIdle:           idle,
		MUnfinished:     float64(unfinished.n),
		MOpsPerSec:      float64(n) / secs,
		MHandoffsPerSec: float64(st.handoffs) / secs,
		MHandoffP50:     st.handoff.at(0.5),
		MHandoffP99:     st.handoff.at(0.99),
		MWaitP50:        all.at(0.5),
		MWaitP99:        all.at(0.99),
		MWaitMax:        us(all.max),
		MFairness:       fair,
		MGrantsMin:      float64(gmin),
		MGrantsMax:      float64(gmax),
		MGaveUp:         float64(gaveUp.Load()) / secs,
		MAllocsPerOp:    perOp(int64(s0.mallocs), int64(s1.mallocs), float64(n)),
		MCallsPerOp:     perOp(s0.calls, s1.calls, float64(n)),
		MSentPerOp:      perOp(s0.sent, s1.sent, float64(n)),
		MErrors:         float64(errs.Load()),
		MStalled:        float64(late),
	}, s0, s1, float64(n)), nil
}

// runRenew: hold k locks with auto-renewal and measure what holding costs.
func runRenew(ctx context.Context, cfg *Config, t *target, lk Locker, k int, runID string, f *failures) (map[string]float64, error) {
	rn, ok := lk.(Renewer)
	if !ok {
		return nil, errSkip
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	g0, heap0 := runtime.NumGoroutine(), ms.HeapAlloc

	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var held, lost, expired, errs atomic.Int64
	var wg crew
	for i := range k {
		wg.Go(func() {
			defer f.catch()
			key := fmt.Sprintf("lockbench:%s:r:%d", runID, i)
			counted := false // fn counted how the hold ended
			err := rn.Hold(hctx, key, cfg.RenewTTL, func(fctx context.Context) error {
				held.Add(1)
				<-fctx.Done()
				switch {
				case hctx.Err() != nil: // the run ended
				case errors.Is(context.Cause(fctx), lease.ErrLeaseExpired):
					expired.Add(1)
					counted = true
				default:
					lost.Add(1)
					counted = true
				}
				return nil
			})
			// Hold reports the loss fn counted already; anything else is an
			// error of its own.
			if err != nil && hctx.Err() == nil && !counted {
				errs.Add(1)
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for held.Load()+errs.Load() < int64(k) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	var s0, s1 snapshot
	var g1 int
	var heap1 uint64
	err := sleepCtx(ctx, cfg.Warmup)
	if err == nil {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		g1, heap1 = runtime.NumGoroutine(), ms.HeapAlloc
		s0 = t.snap(ctx, 1)
		// Every lock renews at least three times in the window.
		err = sleepCtx(ctx, max(cfg.Duration, cfg.RenewTTL))
		s1 = t.snap(ctx, 1)
	}
	cancel()
	late, serr := f.stop(&wg)
	if err = errors.Join(err, serr); err != nil {
		return nil, err
	}
	secs := s1.at.Sub(s0.at).Seconds()
	calls := math.NaN()
	if s0.calls >= 0 && s1.calls >= 0 {
		calls = float64(s1.calls-s0.calls) / secs
	}
	return map[string]float64{
		MRenewCalls:  calls,
		MRenewSent:   float64(s1.sent-s0.sent) / secs,
		MGoroutines:  float64(g1-g0-k) / float64(k),
		MHeapPerLock: (float64(heap1) - float64(heap0)) / float64(k),
		MLost:        float64(lost.Load()),
		MLostExpired: float64(expired.Load()),
		MErrors:      float64(errs.Load()),
		MStalled:     float64(late),
	}, nil
}
