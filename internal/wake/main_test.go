package wake_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/redislock-go/redislock/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.Notice(m))
}
