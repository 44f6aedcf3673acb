package peers

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/bench/lockbench"
	"github.com/redislock-go/redislock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPeersMiniredis runs every adapter on a go-redis client through every
// single-node scenario once, briefly, on miniredis: it checks the adapters,
// not the numbers. (rueidislock needs client-side caching, which miniredis
// lacks: TestRueidislock.)
func TestPeersMiniredis(t *testing.T) {
	var libs []lockbench.Library
	for _, l := range Libraries() {
		if l.Dial == nil {
			libs = append(libs, l)
		}
	}
	cfg := quick()
	cfg.Miniredis = true
	checkRun(t, cfg, libs)
}

// TestRueidislock runs the rueidislock adapters the same way, on a
// redis-server that the tool starts.
func TestRueidislock(t *testing.T) {
	redistest.Binary(t)
	cfg := quick()
	cfg.Spawn = 1
	checkRun(t, cfg, rueidislockLibraries())
}

// quick is a short run of the single-node scenarios.
func quick() lockbench.Config {
	cfg := lockbench.DefaultConfig()
	cfg.Scenarios = []string{lockbench.Uncontended, lockbench.Hotkey, lockbench.Renew}
	cfg.Workers = []int{2}
	cfg.HotWorkers = []int{3}
	cfg.Duration = 200 * time.Millisecond
	cfg.Warmup = 20 * time.Millisecond
	cfg.Reps = 1
	cfg.RenewLocks = 5
	cfg.RenewTTL = 90 * time.Millisecond
	return cfg
}

// checkRun runs libs beside ours and checks that each made progress in
// each scenario without errors or lost locks.
func checkRun(t *testing.T, cfg lockbench.Config, libs []lockbench.Library) {
	t.Helper()
	rep, err := lockbench.Run(context.Background(), cfg, append(lockbench.Ours(), libs...), nil)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[r.Library] = true
		if len(r.Samples) != 1 {
			t.Errorf("%s %s: no sample (%s)", r.Scenario, r.Library, r.Note)
			continue
		}
		assert.False(t, r.Metrics[lockbench.MErrors].Max != 0, "%s %s: errors", r.Scenario, r.Library)
		if r.Scenario == lockbench.Renew {
			assert.False(t, r.Metrics[lockbench.MLost].Max != 0 || r.Metrics[lockbench.MRenewSent].Median <= 0, "%s %s: %+v", r.Scenario, r.Library, r.Metrics)
		} else if r.Metrics[lockbench.MOpsPerSec].Median <= 0 {
			t.Errorf("%s %s: no ops", r.Scenario, r.Library)
		}
	}
	for _, l := range libs {
		assert.True(t, seen[l.Name], "%s not run", l.Name)
	}
}
