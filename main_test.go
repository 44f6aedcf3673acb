package redislock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/redislock-go/redislock/internal/redistest"
)

// TestMain runs the package's tests with goleak. Independent tests call
// t.Parallel, each on servers and keys of its own; they wait for servers
// and timers far more than they compute, so 8 run at a time unless
// -parallel says. The few tests whose checks bound a real duration (a loss
// reported soon after ValidUntil, goroutines counted) do not: they run
// first, alone in the package (TestTopology's two beside each other).
func TestMain(m *testing.M) {
	redistest.Parallel(8)
	goleak.VerifyTestMain(redistest.Notice(m))
}
