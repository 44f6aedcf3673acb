package redislock_test

import (
	"testing"

	"github.com/redislock-go/redislock/internal/testkit"
)

// TestTopology runs the tests on a Redis Cluster (testCluster) and on a
// Sentinel deployment (testSentinel), side by side: each starts servers of
// its own, and checks how soon after ValidUntil a loss is reported, so the
// package's parallel tests do not run beside them (TestMain).
func TestTopology(t *testing.T) {
	testkit.SkipShort(t)
	t.Run("Cluster", func(t *testing.T) {
		t.Parallel()
		testCluster(t)
	})
	t.Run("Sentinel", func(t *testing.T) {
		t.Parallel()
		testSentinel(t)
	})
}
