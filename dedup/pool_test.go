package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redislock-go/redislock/dedup"
	"github.com/redislock-go/redislock/lease"
)

// Eight workers, 1,000 jobs in a shuffled order, each delivered three
// times in a row, so that the copies race: every job runs exactly once, and every delivery gets its value.
// Duplicates that find a job running are redelivered (the default) or
// wait (WithRetry).
func TestWorkerPoolMemory(t *testing.T) {
	t.Parallel()
	for _, wait := range []bool{false, true} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			env := newMemEnv(t)
			var opts []dedup.Option
			if wait {
				opts = append(opts, dedup.WithRetry(lease.LinearBackoff(100*time.Millisecond)))
			}
			groups := make([]*dedup.Group, 8)
			for i := range groups {
				groups[i] = env.group(append(opts, dedup.WithHolder(fmt.Sprintf("w%d", i)))...)
			}
			pool(t, groups, 1000, 3, nil)
		})
	}
}

// pool runs jobs jobs, each delivered deliveries times, through workers
// (one per Group) that redeliver a duplicate that found its job running,
// and checks that every job ran exactly once and every delivery got its
// value. Each run also calls effect, if set.
func pool(t *testing.T, workers []*dedup.Group, jobs, deliveries int, effect func(ctx context.Context, id string) error) {
	t.Helper()
	ctx := ctxFor(t)
	queue := make(chan string, jobs*deliveries)
	var pending sync.WaitGroup
	for _, i := range shuffled(jobs) {
		for range deliveries { // side by side: the copies race each other
			pending.Add(1)
			queue <- fmt.Sprintf("job-%d", i)
		}
	}
	var (
		mu   sync.Mutex
		runs = make(map[string]int)
		n    [3]atomic.Int64
		wg   sync.WaitGroup
	)
	go func() {
		pending.Wait()
		close(queue)
	}()
	for _, g := range workers {
		wg.Go(func() {
			for id := range queue {
				r, err := g.Do(ctx, id, func(ctx context.Context, fence int64) ([]byte, error) {
					mu.Lock()
					runs[id]++
					mu.Unlock()
					if effect != nil {
						if err := effect(ctx, id); err != nil {
							return nil, err
						}
					}
					return []byte("v:" + id), nil
				})
				switch {
				case errors.Is(err, dedup.ErrInProgress):
					n[2].Add(1)
					queue <- id // redeliver, as a queue would
					continue
				case err != nil:
					t.Errorf("%s: %v", id, err)
				case string(r.Value) != "v:"+id:
					t.Errorf("%s: value %q", id, r.Value)
				case r.Ran:
					n[0].Add(1)
				default:
					n[1].Add(1)
				}
				pending.Done()
			}
		})
	}
	wg.Wait()
	for i := range jobs {
		id := fmt.Sprintf("job-%d", i)
		if runs[id] != 1 {
			t.Errorf("%s ran %d times", id, runs[id])
		}
	}
	t.Logf("%d deliveries of %d jobs: %d runs, %d stored outcomes, %d redeliveries while running",
		jobs*deliveries, jobs, n[0].Load(), n[1].Load(), n[2].Load())
}

// shuffled returns 0..n-1 in a random order.
func shuffled(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	rand.Shuffle(n, func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}
