package lockbench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitLocker's Obtain waits for a wake-up that never comes, until its
// context ends (as a library that lost a wake-up does), or, with
// ignoreCtx, until release is closed.
type waitLocker struct {
	rawLocker
	ignoreCtx bool
	release   chan struct{}
}

func (l *waitLocker) Obtain(ctx context.Context, key string, ttl time.Duration) (Held, error) {
	if l.ignoreCtx {
		<-l.release
		return nil, ErrBusy
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// stallRun runs the uncontended and hot-key scenarios of a library that
// stalls, beside one that does not.
func stallRun(t *testing.T, ignoreCtx bool) *Report {
	t.Helper()
	cfg := quickConfig()
	cfg.Miniredis = true
	cfg.Scenarios = []string{Uncontended, Hotkey}
	cfg.Workers = []int{2}
	cfg.StopGrace = 50 * time.Millisecond
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // the workers left behind end with the test
	libs := append(rawLibs()[:1], Library{Name: "stalls", Primary: true, New: func(n []redis.UniversalClient) (Locker, error) {
		return &waitLocker{rawLocker: rawLocker{rdb: n[0]}, ignoreCtx: ignoreCtx, release: release}, nil
	}})
	done := make(chan struct{})
	var rep *Report
	var err error
	go func() {
		defer close(done)
		rep, err = Run(context.Background(), cfg, libs, nil)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute): // a hang is what this test catches; no timing is asserted
		t.Fatal("the run did not end")
	}
	require.NoError(t, err)
	return rep
}

// A library call that never returns until cancelled is cancelled after
// the grace, and the repetition is reported as stalled (a problem).
func TestStallCancelledIsReported(t *testing.T) {
	rep := stallRun(t, false)
	var stalled int
	for _, r := range rep.Results {
		if r.Library != "stalls" {
			continue
		}
		stalled++
		if len(r.Samples) != rep.Config.Reps || r.Metrics[MStalled].Min <= 0 {
			t.Errorf("%s: %d samples, stalled %+v", r.Scenario, len(r.Samples), r.Metrics[MStalled])
		}
		assert.True(t, strings.Contains(noteOf(r), "STALLED"), "%s: note %q", r.Scenario, noteOf(r))
	}
	require.Equal(t, 2, stalled, "stalled cells %d, want 2", stalled)
	if p := strings.Join(Problems(rep), "\n"); strings.Count(p, "stalls: "+MStalled) != 2 {
		t.Errorf("problems %q", p)
	}
}

// A library call that does not return even when cancelled is left behind:
// the cell is STALLED, skipped in later repetitions, and the run goes on.
func TestStallStuckIsLeftBehind(t *testing.T) {
	rep := stallRun(t, true)
	for _, r := range rep.Results {
		switch {
		case r.Library != "stalls":
			assert.Len(t, r.Samples, rep.Config.Reps, "%s %s: %d samples", r.Scenario, r.Library, len(r.Samples))
		case !strings.HasPrefix(r.Note, "STALLED: 2 worker(s) did not return") && r.Scenario == Uncontended,
			!strings.HasPrefix(r.Note, "STALLED:") || len(r.Samples) != 0:
			t.Errorf("%s: note %q, %d samples", r.Scenario, r.Note, len(r.Samples))
		}
	}
	if p := Problems(rep); len(p) != 2 {
		t.Errorf("problems %q", p)
	}
}
