package redislock_test

import (
	"testing"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/stretchr/testify/require"
)

func TestRetryStrategies(t *testing.T) {
	t.Parallel()
	_, ok := redislock.NoRetry().Backoff(1)
	require.False(t, ok, "NoRetry retried")
	d, ok := redislock.LinearBackoff(7 * time.Millisecond).Backoff(5)
	require.True(t, ok, "LinearBackoff")
	require.Equal(t, 7*time.Millisecond, d, "LinearBackoff")
	lim := redislock.LimitRetry(redislock.LinearBackoff(time.Millisecond), 2)
	for attempt, want := range []bool{true, true, true, false} { // attempts 0..3
		_, ok := lim.Backoff(attempt)
		require.False(t, ok != want && attempt > 0, "LimitRetry attempt %d: ok=%v", attempt, ok)
	}
	exp := redislock.ExponentialBackoff(2*time.Millisecond, 64*time.Millisecond)
	for attempt := 1; attempt < 100; attempt++ {
		d, ok := exp.Backoff(attempt)
		ceil := min(64*time.Millisecond, 2*time.Millisecond<<min(attempt-1, 30))
		require.True(t, ok, "attempt %d: %v not in [2ms, %v]", attempt, d, ceil)
		require.GreaterOrEqual(t, d, 2*time.Millisecond, "attempt %d not in [2ms, %v]", attempt, ceil)
		require.LessOrEqual(t, d, ceil, "attempt %d not in [2ms, %v]", attempt, ceil)
	}
}
