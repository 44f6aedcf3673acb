package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
)

// runSlack is how late, on a loaded 2-core machine running -race, the
// cancellation the library scheduled for ValidUntil may come: its timer
// and the goroutines that carry it out wait for a CPU (25 ms were exceeded
// by 7 ms with the machine's two cores four times oversubscribed). A
// cancellation that waited for a renewal stuck in a fault would be late by
// the fault's hold, 450 ms.
const runSlack = 100 * time.Millisecond

// Run under server stalls and network faults: 4 workers each Run a critical
// section longer than the TTL (so it lives on renewals) doing fenced
// read-sleep-writes, stopping as soon as fn's ctx is done. Claims: fn's ctx
// is cancelled no later than the last ValidUntil the lock confirmed (plus
// scheduling slack), Run then returns ErrLockLost, and the usage windows and
// the register stay clean.
func TestClaimRunCancelsByValidUntil(t *testing.T) {
	needRedis(t)
	n := startNodes(t, 1)[0]
	c := singleClient(t, n)
	keys := []string{"run-loss-0", "run-loss-1"} // two locks, two workers each
	regs := []RedisRegister{resource(t, "reg:run-loss-0"), resource(t, "reg:run-loss-1")}
	h := NewHistory()
	lease := 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var faults int
	nemDone := make(chan struct{})
	go func() {
		defer close(nemDone)
		faults = Nemesis{Gap: 250 * time.Millisecond, Hold: 450 * time.Millisecond, Seed: 41, Faults: []Fault{
			PauseNode("n0", n.srv),
			Latency(n.proxy, 350, 0),
			Blackhole(n.proxy),
			DebugSleep("n0", n.srv, 400*time.Millisecond),
		}}.Run(ctx, h)
	}()

	type late struct {
		seen, validUntil int64
		cause            error
	}
	var mu sync.Mutex
	var lates []late
	var lost, completed, other int
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key, reg := keys[w%2], regs[w%2]
			for i := 0; i < 50 && ctx.Err() == nil; i++ {
				call := h.Now()
				var grant Op
				var exit int64
				var cancelled bool
				err := c.Run(context.Background(), key, lease, func(fctx context.Context, l *redislock.Lock) error {
					grant = Op{Worker: w, Kind: Acquire, Key: key, Call: call, Return: h.Now(), TTL: lease, Outcome: OK,
						Token: l.Token(), Fence: l.Fence(), ValidUntil: h.At(l.ValidUntil())}
					vu := grant.ValidUntil
					// When the ctx ends, not when fn, maybe in a register
					// call, looks.
					cancelledAt := make(chan int64, 1)
					context.AfterFunc(fctx, func() { cancelledAt <- h.Now() })
					tick := time.NewTicker(5 * time.Millisecond)
					defer tick.Stop()
					defer func() { exit = h.Now() }()
					for step := 0; step < 8; step++ {
						read, _, err := reg.Get(context.Background())
						if err != nil {
							return err
						}
						hold := time.NewTimer(60 * time.Millisecond)
					wait:
						for {
							select {
							case <-fctx.Done():
								hold.Stop()
								seen := <-cancelledAt
								cancelled = true
								if seen > vu+int64(runSlack) {
									mu.Lock()
									lates = append(lates, late{seen, vu, context.Cause(fctx)})
									mu.Unlock()
								}
								return fctx.Err()
							case <-tick.C:
								if v := l.ValidUntil(); !v.IsZero() {
									vu = max(vu, h.At(v))
								}
							case <-hold.C:
								break wait
							}
						}
						cnt, _ := Counter(read)
						value := fmt.Sprintf("%d|r%d.%d.%d", cnt+1, w, i, step)
						wc := h.Now()
						werr := reg.Set(context.Background(), value, l.Fence())
						h.Add(Op{Worker: w, Kind: Write, Key: reg.Name(), Call: wc, Return: h.Now(), Outcome: Classify(werr),
							Token: l.Token(), Fence: l.Fence(), Read: read, Value: value, Err: errText(werr)})
					}
					grant.ValidUntil = max(grant.ValidUntil, vu)
					return nil
				}, redislock.WithRetry(retry()))
				if grant.Token == "" { // not obtained: fn never ran
					h.Add(Op{Worker: w, Kind: Acquire, Key: key, Call: call, Return: h.Now(), TTL: lease, Outcome: Classify(err), Err: errText(err)})
					time.Sleep(5 * time.Millisecond)
					continue
				}
				mu.Lock()
				switch {
				case errors.Is(err, redislock.ErrLockLost):
					lost++
				case err == nil:
					completed++
				default:
					other++
				}
				mu.Unlock()
				// A loss found just after fn's last look at its ctx still
				// makes Run report it; a cancelled fn always does.
				assert.False(t, cancelled && !errors.Is(err, redislock.ErrLockLost), "fn's ctx was cancelled but Run returned %v", err)
				if d := time.Duration(h.Now() - call); d > 2*time.Second {
					t.Logf("worker %d: Run took %v (fn exit after %v): %v", w, d, time.Duration(exit-call), err)
				}
				h.Add(grant)
				// The holder stops using the lock when fn returns; Run's own
				// release follows.
				h.Add(Op{Worker: w, Kind: Release, Key: key, Call: exit, Return: h.Now(), Outcome: OK, Token: grant.Token, Note: "fn returned (Run releases)"})
			}
		}()
	}
	wg.Wait()
	cancel()
	<-nemDone
	for _, l := range lates {
		t.Errorf("fn saw its ctx cancelled at %s, after the last confirmed ValidUntil %s (+%v slack); cause: %v",
			ms(l.seen), ms(l.validUntil), runSlack, l.cause)
	}
	summary.faults.Add(int64(faults))
	t.Logf("Run: %d completed, %d lost (ErrLockLost), %d other errors, %d faults", completed, lost, other, faults)
	// The release records here are the ends of fn, not Release calls, so only
	// the lease, fence and register checks apply, not the lock model.
	ops := h.Ops()
	summary.ops.Add(int64(len(ops)))
	r := Report{Ops: len(ops)}
	r.Violations = append(r.Violations, CheckLeases(ops)...)
	r.Violations = append(r.Violations, CheckFences(ops)...)
	for _, reg := range regs {
		val, fence, err := reg.Get(context.Background())
		require.NoError(t, err)
		r.Violations = append(r.Violations, CheckRegister(ops, reg.Name(), val, fence)...)
	}
	expectClean(t, "Run: fn's ctx is cancelled by ValidUntil; usage windows never overlap", r, h.Ops(), h.Faults())
}
