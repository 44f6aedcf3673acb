package leasetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Exclusion checks mutual exclusion the way a user would lose it: workers
// goroutines each take a lock rounds times with lock, and while holding it
// read a shared counter, pause, and write it back incremented. Two holders
// at once lose an update or meet inside; either fails t, as does an error
// from lock. lock returns the function that releases what it took.
func Exclusion(t testing.TB, workers, rounds int, lock func(ctx context.Context) (unlock func(), err error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		counter int // guarded by the lock under test, not by Go
		inside  atomic.Int32
		overlap atomic.Int32
		wg      sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for range rounds {
				unlock, err := lock(ctx)
				if err != nil {
					t.Errorf("lock: %v", err)
					return
				}
				if inside.Add(1) > 1 {
					overlap.Add(1)
				}
				v := counter
				time.Sleep(100 * time.Microsecond) // widen the window a second holder would use
				counter = v + 1
				inside.Add(-1)
				unlock()
			}
		})
	}
	wg.Wait()
	if n := overlap.Load(); n > 0 {
		t.Errorf("%d times two holders were inside at once", n)
	}
	if want := workers * rounds; counter != want && !t.Failed() {
		t.Errorf("counter = %d after %d locked increments: updates were lost", counter, want)
	}
}
