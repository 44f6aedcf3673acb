package redisproc

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// need skips t without the binaries (fails it under
// REDISLOCK_REQUIRE_REDIS=1). redistest has the same for other packages;
// it cannot be imported here (it imports this package).
func need(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			require.NotEqual(t, "1", os.Getenv("REDISLOCK_REQUIRE_REDIS"), "%s not found on PATH and REDISLOCK_REQUIRE_REDIS=1", name)
			t.Skip(name + " not found on PATH; skipping real-Redis test (set REDISLOCK_REQUIRE_REDIS=1 to make this a failure)")
		}
	}
}
