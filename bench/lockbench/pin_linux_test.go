package lockbench

import (
	"context"
	"runtime"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/redislock-go/redislock/internal/redistest"
)

// --pin runs the one-worker cells on CPU 0 with GOMAXPROCS 1 (the server
// too) and puts everything back afterwards.
func TestPin(t *testing.T) {
	redistest.Binary(t)
	cfg := quickConfig()
	cfg.Scenarios = []string{Uncontended}
	cfg.Workers = []int{1, 2}
	cfg.Reps = 1
	cfg.Spawn = 1
	cfg.Pin = true
	procs := runtime.GOMAXPROCS(0)
	type seen struct{ procs, cpus int }
	var cells []seen // as each cell began: the 1-worker cell, then the other
	libs := rawLibs()
	inner := libs[0].New
	libs[0].New = func(n []redis.UniversalClient) (Locker, error) {
		var set unix.CPUSet
		assert.NoError(t, unix.SchedGetaffinity(0, &set))
		cells = append(cells, seen{runtime.GOMAXPROCS(0), set.Count()})
		return inner(n)
	}
	rep, err := Run(context.Background(), cfg, libs[:1], nil)
	require.NoError(t, err)
	if !rep.Results[0].Pinned || rep.Results[1].Pinned {
		t.Errorf("pinned: %v, %v; want the one-worker cell only", rep.Results[0].Pinned, rep.Results[1].Pinned)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set != startCPUs {
		t.Errorf("affinity after the run: %v, %d CPUs, want %d", err, set.Count(), startCPUs.Count())
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS %d after the run, want %d", got, procs)
	}
	assert.False(t, len(cells) != 2 || cells[0] != (seen{1, 1}) || cells[1] != (seen{procs, startCPUs.Count()}), "GOMAXPROCS and CPUs as the cells began: %+v, want 1, 1 then %d, %d", cells, procs, startCPUs.Count())
}
