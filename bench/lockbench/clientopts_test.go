package lockbench

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The go-redis clients handed to the libraries have ContextTimeoutEnabled
// unless --context-timeout=false, and BatchOptions unless
// --batch-options=false, and the report says which.
func TestClientOptionFlags(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		want  bool // ContextTimeoutEnabled
		batch bool // BatchOptions
		note  string
	}{
		{nil, true, true, "ContextTimeoutEnabled, AutoPipelineOptions: 2 batches in flight, unordered, 20µs flush delay;"},
		{[]string{"--context-timeout=false"}, false, true, "ContextTimeoutEnabled off, AutoPipelineOptions"},
		{[]string{"--batch-options=false"}, true, false, "ContextTimeoutEnabled;"},
	} {
		cfg, out := DefaultConfig(), Output{}
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		BindFlags(fs, &cfg, &out)
		require.NoError(t, fs.Parse(tc.args))
		cfg.Miniredis = true
		cfg.Scenarios = []string{Uncontended}
		cfg.Workers = []int{1}
		cfg.Duration, cfg.Warmup, cfg.Reps = 20*time.Millisecond, 0, 1
		var seen, mismatched atomic.Int32
		lib := Library{Name: "raw", Primary: true, New: func(n []redis.UniversalClient) (Locker, error) {
			seen.Add(1)
			o := n[0].(*redis.Client).Options()
			if o.ContextTimeoutEnabled != tc.want || (o.AutoPipelineOptions != nil) != tc.batch {
				mismatched.Add(1)
			}
			return &rawLocker{rdb: n[0]}, nil
		}}
		rep, err := Run(context.Background(), cfg, []Library{lib}, nil)
		require.NoError(t, err)
		assert.False(t, seen.Load() == 0 || mismatched.Load() != 0, "%v: %d of %d clients without ContextTimeoutEnabled=%v, batch options %v", tc.args, mismatched.Load(), seen.Load(), tc.want, tc.batch)
		assert.False(t, rep.Target.ContextTimeout != tc.want || rep.Target.BatchOptions != tc.batch, "%v: target info context_timeout = %v, batch_options = %v", tc.args, rep.Target.ContextTimeout, rep.Target.BatchOptions)
		var md, table bytes.Buffer
		require.NoError(t, WriteMarkdown(&md, rep))
		WriteTable(&table, rep)
		for _, s := range []string{md.String(), table.String()} {
			assert.True(t, strings.Contains(s, tc.note), "%v: header lacks %q:\n%s", tc.args, tc.note, s)
		}
	}
}
