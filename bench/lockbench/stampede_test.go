package lockbench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/redistest"
)

func TestStampedeScenario(t *testing.T) {
	srv := redistest.Start(t)
	cfg := DefaultConfig()
	cfg.Scenarios = []string{Stampede}
	cfg.Addr = srv.Addr()
	cfg.Duration = 100 * time.Millisecond
	cfg.Warmup = 10 * time.Millisecond
	cfg.Reps = 1
	cfg.StampedeCallers = 20
	cfg.StampedeFill = 5 * time.Millisecond
	rep, err := Run(context.Background(), cfg, append(Ours()[:1], rawLibs()...), nil)
	require.NoError(t, err)
	libs := map[string]bool{}
	for _, r := range rep.Results {
		libs[r.Library] = true
		require.Len(t, r.Samples, 1, "%s: %d samples (%s)", r.Library, len(r.Samples), r.Note)
		m := r.Metrics
		assert.False(t, m[MOpsPerSec].Median <= 0 || m[MErrors].Max != 0 || m[MValueP99].Median <= 0, "%s: %+v", r.Library, m)
		if r.Library == stampedeLib.Name && m[MFillsPerKey].Max != 1 {
			t.Errorf("the stampede package filled %v times per key, want 1", m[MFillsPerKey].Max)
		}
	}
	for _, want := range []string{stampedeLib.Name, "redislock/linear-1ms", "raw/1ms"} {
		assert.True(t, libs[want], "no result for %s: %v", want, libs)
	}
	assert.LessOrEqual(t, len(Problems(rep)), 0, "problems: %v", Problems(rep))
	var out, md bytes.Buffer
	if err := WriteOutputs(rep, Output{}, &out); err != nil || !strings.Contains(out.String(), "Stampede:") {
		t.Errorf("table: %v\n%s", err, out.String())
	}
	if err := WriteMarkdown(&md, rep); err != nil || !strings.Contains(md.String(), "**Stampede**") {
		t.Errorf("markdown: %v\n%s", err, md.String())
	}
}
