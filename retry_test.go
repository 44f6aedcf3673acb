package redislock_test

import (
	"testing"
	"time"

	"github.com/redislock-go/redislock"
)

func TestRetryStrategies(t *testing.T) {
	if _, ok := redislock.NoRetry().Backoff(1); ok {
		t.Fatal("NoRetry retried")
	}
	if d, ok := redislock.LinearBackoff(7 * time.Millisecond).Backoff(5); !ok || d != 7*time.Millisecond {
		t.Fatal("LinearBackoff", d, ok)
	}
	lim := redislock.LimitRetry(redislock.LinearBackoff(time.Millisecond), 2)
	for attempt, want := range []bool{true, true, true, false} { // attempts 0..3
		if _, ok := lim.Backoff(attempt); ok != want && attempt > 0 {
			t.Fatalf("LimitRetry attempt %d: ok=%v", attempt, ok)
		}
	}
	exp := redislock.ExponentialBackoff(2*time.Millisecond, 64*time.Millisecond)
	for attempt := 1; attempt < 100; attempt++ {
		d, ok := exp.Backoff(attempt)
		ceil := min(64*time.Millisecond, 2*time.Millisecond<<min(attempt-1, 30))
		if !ok || d < 2*time.Millisecond || d > ceil {
			t.Fatalf("attempt %d: %v not in [2ms, %v]", attempt, d, ceil)
		}
	}
}
