package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
)

// Register is the protected resource: a value written under the lock, each
// write carrying the writer's fence.
type Register interface {
	Name() string
	Get(ctx context.Context) (value string, fence int64, err error)
	// Set returns an error matching redislock.ErrStaleFence when rejected.
	Set(ctx context.Context, value string, fence int64) error
}

// RedisRegister is a fenced register on a redis-server of its own (not one
// of the lock nodes, and not faulted), written with redislock.FencedSet.
type RedisRegister struct {
	RDB *redis.Client
	Key string
}

func (r RedisRegister) Name() string { return r.Key }

func (r RedisRegister) Get(ctx context.Context) (string, int64, error) {
	v, f, err := redislock.FencedGet(ctx, r.RDB, r.Key)
	if errors.Is(err, redis.Nil) {
		return "", 0, nil
	}
	return v, f, err
}

func (r RedisRegister) Set(ctx context.Context, value string, fence int64) error {
	return redislock.FencedSet(ctx, r.RDB, r.Key, value, fence, 10*time.Minute)
}

// MemRegister is an in-process register. With Unfenced set it accepts every
// write (the broken variant: a resource that ignores fences).
type MemRegister struct {
	Key      string
	Unfenced bool

	mu    sync.Mutex
	gate  redislock.FenceGate
	value string
	fence int64
}

func (m *MemRegister) Name() string { return m.Key }

func (m *MemRegister) Get(context.Context) (string, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.value, m.fence, nil
}

func (m *MemRegister) Set(_ context.Context, value string, fence int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := func() error { m.value, m.fence = value, fence; return nil }
	if m.Unfenced {
		return set()
	}
	return m.gate.Do(fence, set)
}

// Workload is 8–16 workers doing a non-atomic read-sleep-write of a counter
// in the register under the lock, each write fenced.
type Workload struct {
	Client   *redislock.Client
	Register Register
	Key      string
	Workers  int
	TTL      time.Duration
	Duration time.Duration // wall-clock bound of the run
	MaxIters int           // per-worker bound on lock attempts (0: 200)
	Hold     time.Duration // sleep between read and write (jittered up to 2x)
	Retry    redislock.RetryStrategy
	Refresh  bool // refresh once per grant before writing

	Seed uint64
}

// Stats counts a run's outcomes.
type Stats struct {
	Grants, NotObtained, AcquireUnknown  int
	WritesOK, WritesStale, WritesUnknown int
	WritesSkipped                        int // lease lost or too near its end to write
	Releases, ReleaseNotHeld             int
}

// Run runs the workload, recording into h, and returns its counts.
func (w Workload) Run(ctx context.Context, h *History) Stats {
	ctx, cancel := context.WithTimeout(ctx, w.Duration)
	defer cancel()
	maxIters := w.MaxIters
	if maxIters == 0 {
		maxIters = 200
	}
	var mu sync.Mutex
	var total Stats
	var wg sync.WaitGroup
	for id := range w.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := w.worker(ctx, h, id, maxIters)
			mu.Lock()
			total.add(s)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return total
}

func (s *Stats) add(o Stats) {
	s.Grants += o.Grants
	s.NotObtained += o.NotObtained
	s.AcquireUnknown += o.AcquireUnknown
	s.WritesOK += o.WritesOK
	s.WritesStale += o.WritesStale
	s.WritesUnknown += o.WritesUnknown
	s.WritesSkipped += o.WritesSkipped
	s.Releases += o.Releases
	s.ReleaseNotHeld += o.ReleaseNotHeld
}

// Classify maps an error to an outcome: nil is OK; ErrNotObtained (without a
// context error that could have cut an attempt short), ErrNotHeld and
// ErrStaleFence are definite refusals; everything else is Unknown.
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return Unknown
	case errors.Is(err, redislock.ErrNotObtained), errors.Is(err, redislock.ErrNotHeld), errors.Is(err, redislock.ErrStaleFence):
		return Fail
	}
	return Unknown
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 600 {
		s = s[:600] + "..."
	}
	return s
}

func (w Workload) worker(ctx context.Context, h *History, id, maxIters int) Stats {
	var st Stats
	rng := rand.New(rand.NewPCG(w.Seed, uint64(id)))
	jitter := func(d time.Duration) time.Duration {
		if d <= 0 {
			return 0
		}
		return d + time.Duration(rng.Int64N(int64(d)))
	}
	sleep := func(d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	opts := []redislock.Option{}
	if w.Retry != nil {
		opts = append(opts, redislock.WithRetry(w.Retry))
	}
	for i := 0; i < maxIters && ctx.Err() == nil; i++ {
		// Acquire. The per-attempt ctx is not the run's: an attempt in flight
		// when the run ends still finishes and is recorded.
		actx, acancel := context.WithTimeout(context.Background(), 2*w.TTL+time.Second)
		call := h.Now()
		l, err := w.Client.Obtain(actx, w.Key, w.TTL, opts...)
		ret := h.Now()
		acancel()
		op := Op{Worker: id, Kind: Acquire, Key: w.Key, Call: call, Return: ret, TTL: w.TTL, Outcome: Classify(err), Err: errText(err)}
		if err != nil {
			h.Add(op)
			switch op.Outcome {
			case Fail:
				st.NotObtained++
			default:
				st.AcquireUnknown++
				sleep(jitter(5 * time.Millisecond)) // an unreachable node: do not spin
			}
			continue
		}
		st.Grants++
		op.Token, op.Fence, op.ValidUntil = l.Token(), l.Fence(), h.At(l.ValidUntil())
		h.Add(op)
		w.critical(h, id, i, l, rng, jitter, &st)
		c := h.Now()
		rerr := l.Release(context.Background())
		h.Add(Op{Worker: id, Kind: Release, Key: w.Key, Call: c, Return: h.Now(), TTL: w.TTL, Outcome: Classify(rerr), Token: l.Token(), Err: errText(rerr)})
		st.Releases++
		if Classify(rerr) == Fail {
			st.ReleaseNotHeld++
		}
	}
	return st
}

// critical is the read-sleep-write under the lock.
func (w Workload) critical(h *History, id, iter int, l *redislock.Lock, rng *rand.Rand, jitter func(time.Duration) time.Duration, st *Stats) {
	bg := context.Background()
	rctx, rcancel := context.WithTimeout(bg, time.Second)
	read, _, err := w.Register.Get(rctx)
	rcancel()
	if err != nil {
		return // the register is not faulted; nothing was written
	}
	n, ok := Counter(read)
	if !ok {
		return
	}
	time.Sleep(jitter(w.Hold))
	if w.Refresh && rng.IntN(2) == 0 {
		fctx, fcancel := context.WithTimeout(bg, w.TTL)
		c := h.Now()
		ferr := l.Refresh(fctx, w.TTL)
		fcancel()
		op := Op{Worker: id, Kind: Refresh, Key: w.Key, Call: c, Return: h.Now(), TTL: w.TTL, Outcome: Classify(ferr), Token: l.Token(), Err: errText(ferr)}
		if ferr == nil {
			op.ValidUntil = h.At(l.ValidUntil())
		}
		h.Add(op)
		if errors.Is(ferr, redislock.ErrNotHeld) {
			st.WritesSkipped++ // the lock is lost: a correct holder stops
			return
		}
	}
	// A correct holder writes only inside its lease, and with a margin: the
	// write must land before the lease ends, and a worker descheduled
	// between this check and the write's arrival (a loaded machine, a
	// fault's reconnect burst) would otherwise write after its lease, a late
	// write that fences cannot order when it lands before the next holder's
	// (a lost update that is the paused-holder limit, not this claim).
	if time.Until(l.ValidUntil()) < w.TTL/2 {
		st.WritesSkipped++
		return
	}
	value := fmt.Sprintf("%d|w%d.%d", n+1, id, iter)
	wctx, wcancel := context.WithTimeout(bg, time.Second)
	c := h.Now()
	werr := w.Register.Set(wctx, value, l.Fence())
	wcancel()
	op := Op{Worker: id, Kind: Write, Key: w.Register.Name(), Call: c, Return: h.Now(), Outcome: Classify(werr),
		Token: l.Token(), Fence: l.Fence(), Read: read, Value: value, Err: errText(werr)}
	h.Add(op)
	switch op.Outcome {
	case OK:
		st.WritesOK++
	case Fail:
		st.WritesStale++
	default:
		st.WritesUnknown++
	}
}
