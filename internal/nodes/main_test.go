package nodes_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/redislock-go/redislock/internal/redistest"
)

// TestMain runs the tests with goleak, 8 parallel tests at a time unless
// -parallel says (redistest.Parallel).
func TestMain(m *testing.M) {
	redistest.Parallel(8)
	goleak.VerifyTestMain(redistest.Notice(m))
}
