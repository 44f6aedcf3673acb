package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/dedup"
	"github.com/redislock-go/redislock/leader"
	"github.com/redislock-go/redislock/lease"
)

// Leader election from the leader package runs on pglock unchanged: the
// candidates, each with a Client and pool of its own, take turns by
// resigning; terms strictly increase, and at no time do two terms overlap.
func TestLeaderElection(t *testing.T) {
	table := newTable(t)
	const candidates, terms = 3, 12
	elections := make([]*leader.Election, candidates)
	for i := range elections {
		c := newClient(t, newPool(t), table)
		e, err := leader.New(c.Locker(), "scheduler", leader.WithHolder(fmt.Sprintf("candidate-%d", i)),
			leader.WithLease(2*time.Second), leader.WithRetry(lease.LinearBackoff(200*time.Millisecond)))
		require.NoError(t, err)
		elections[i] = e
	}
	ctx := ctxFor(t)
	var (
		mu      sync.Mutex
		fences  []int64
		leading atomic.Int32
		wg      sync.WaitGroup
	)
	for _, e := range elections {
		wg.Go(func() {
			for {
				mu.Lock()
				done := len(fences) >= terms
				mu.Unlock()
				if done {
					return
				}
				term, err := e.Campaign(ctx)
				if err != nil {
					t.Errorf("%s: Campaign: %v", e.Identity(), err)
					return
				}
				if n := leading.Add(1); n != 1 {
					t.Errorf("%d leaders at once", n)
				}
				if info, err := e.Leader(ctx); err != nil || info.Identity != e.Identity() || info.Term != term.Fence() {
					t.Errorf("Leader() = %+v, %v; want %s in term %d", info, err, e.Identity(), term.Fence())
				}
				mu.Lock()
				fences = append(fences, term.Fence())
				mu.Unlock()
				leading.Add(-1)
				assert.NoError(t, term.Resign(ctx), "Resign")
			}
		})
	}
	wg.Wait()
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("term %d after %d: terms must increase (%v)", fences[i], fences[i-1], fences)
		}
	}
	require.GreaterOrEqual(t, len(fences), terms, "%d terms, want %d", len(fences), terms)
}

// Per-job deduplication from the dedup package runs on pglock unchanged:
// 4 workers, each with a Client and pool of its own, get every job three
// times; each job's side effect happens once.
func TestDeduplication(t *testing.T) {
	table := newTable(t)
	const workers, jobs, deliveries = 4, 60, 3
	groups := make([]*dedup.Group, workers)
	for i := range groups {
		c := newClient(t, newPool(t), table)
		g, err := dedup.New(c.Locker(), c.Store(), dedup.WithHolder(fmt.Sprintf("worker-%d", i)),
			dedup.WithRetry(lease.LinearBackoff(20*time.Millisecond)), dedup.WithLease(5*time.Second))
		require.NoError(t, err)
		groups[i] = g
	}
	ctx := ctxFor(t)
	var effects [jobs]atomic.Int32
	queue := make(chan int, jobs*deliveries)
	for d := range deliveries {
		for j := range jobs {
			queue <- (j + d*7) % jobs // the copies interleave
		}
	}
	close(queue)
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Go(func() {
			for j := range queue {
				id := fmt.Sprintf("job-%d", j)
				_, err := g.Do(ctx, id, func(ctx context.Context, fence int64) ([]byte, error) {
					effects[j].Add(1)
					return []byte(id), nil
				})
				assert.False(t, err != nil && !errors.Is(err, lease.ErrNotObtained), "%s: %v", id, err)
			}
		})
	}
	wg.Wait()
	for j := range effects {
		if n := effects[j].Load(); n != 1 {
			t.Errorf("job %d ran %d times", j, n)
		}
	}
}
