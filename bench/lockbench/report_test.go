package lockbench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// neverLocker never grants: every Obtain waits for its ctx, then is busy.
type neverLocker struct{}

func (neverLocker) Obtain(ctx context.Context, _ string, _ time.Duration) (Held, error) {
	<-ctx.Done()
	return nil, ErrBusy
}

func (neverLocker) Close() error { return nil }

// A hot key that grants nothing in a repetition is shown as such, and the
// waits still going on at the window's end count: they are the waits.
func TestHotkeyNoGrant(t *testing.T) {
	cfg := quickConfig()
	cfg.Miniredis = true
	cfg.Scenarios = []string{Hotkey}
	cfg.HotWorkers = []int{3}
	cfg.WaitTimeout = 50 * time.Millisecond
	libs := []Library{{Name: "never", Primary: true, New: func([]redis.UniversalClient) (Locker, error) { return neverLocker{}, nil }}}
	rep, err := Run(context.Background(), cfg, libs, nil)
	require.NoError(t, err)
	r := rep.Results[0]
	if m := r.Metrics; m[MIdle].Min != 1 || m[MUnfinished].Median != 3 || m[MWaitMax].Median < us(cfg.Duration) {
		t.Errorf("metrics %+v", m)
	}
	var out bytes.Buffer
	WriteTable(&out, rep)
	assert.True(t, strings.Contains(out.String(), "NO GRANT in 2 of 2 repetitions"), "table does not show the idle repetitions:\n%s", out.String())
	assert.NotEqual(t, 0, len(Problems(rep)), "no problem reported for a run without grants")
}

func TestCommandsOf(t *testing.T) {
	r := &Result{Metrics: map[string]Stat{
		MCmdCalls + "get": {Median: 2}, MCmdUsec + "get": {Median: 0.5},
		MCmdCalls + "evalsha": {Median: 2}, MCmdUsec + "evalsha": {Median: 10},
		MOpsPerSec: {Median: 1},
	}}
	if got, want := commandsOf(r), "evalsha 2.00 × 10.0, get 2.00 × 0.50"; got != want {
		t.Errorf("commandsOf = %q, want %q", got, want)
	}
	if got := workersOf(&Result{Workers: 1, Pinned: true}); got != "1, pinned" {
		t.Errorf("workersOf = %q", got)
	}
}
