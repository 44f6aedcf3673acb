package semaphore_test

import (
	"testing"

	"github.com/redislock-go/redislock/internal/redistest"
	"go.uber.org/goleak"
)

// TestMain runs the tests with goleak, 8 parallel tests at a time unless
// -parallel says (redistest.Parallel): they wait for servers and timers.
func TestMain(m *testing.M) {
	redistest.Parallel(8)
	goleak.VerifyTestMain(m)
}
