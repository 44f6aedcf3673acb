package lockbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redislock-go/redislock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rawLocker is a minimal SET NX PX lock used to test the runner without
// depending on any library.
type rawLocker struct {
	rdb   redis.UniversalClient
	retry time.Duration
}

// NewScriptServerSHA: the digest comes from SCRIPT LOAD, as under
// GODEBUG=fips140=only, where NewScript's SHA-1 panics.
var rawRelease = redis.NewScriptServerSHA(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`)

type rawHeld struct {
	l        *rawLocker
	key, tok string
}

func (l *rawLocker) Obtain(ctx context.Context, key string, ttl time.Duration) (Held, error) {
	tok := runID()
	for {
		ok, err := l.rdb.SetNX(ctx, key, tok, ttl).Result()
		if err != nil {
			if ctx.Err() != nil {
				return nil, errors.Join(ErrBusy, ctx.Err())
			}
			return nil, err
		}
		if ok {
			return &rawHeld{l, key, tok}, nil
		}
		if l.retry == 0 || sleepCtx(ctx, l.retry) != nil {
			return nil, ErrBusy
		}
	}
}

func (h *rawHeld) Release(ctx context.Context) error {
	return rawRelease.Run(ctx, h.l.rdb, []string{h.key}, h.tok).Err()
}

func (l *rawLocker) Hold(ctx context.Context, key string, ttl time.Duration, fn func(context.Context) error) error {
	h, err := l.Obtain(ctx, key, ttl)
	if err != nil {
		return err
	}
	refresh := func(ctx context.Context) error { return l.rdb.PExpire(ctx, key, ttl).Err() }
	return ManualRenew(ctx, ttl, refresh, h.Release, fn)
}

func (l *rawLocker) Close() error { return nil }

func rawLibs() []Library {
	mk := func(name string, retry time.Duration, primary bool) Library {
		return Library{Name: name, Primary: primary, Note: "test adapter", New: func(n []redis.UniversalClient) (Locker, error) {
			return &rawLocker{rdb: n[0], retry: retry}, nil
		}}
	}
	return []Library{mk("raw/1ms", time.Millisecond, true), mk("raw/none", 0, false)}
}

func quickConfig() Config {
	c := DefaultConfig()
	c.Scenarios = []string{Uncontended, Hotkey, Renew}
	c.Workers = []int{1, 4}
	c.HotWorkers = []int{4}
	c.Duration = 150 * time.Millisecond
	c.Warmup = 20 * time.Millisecond
	c.Reps = 2
	c.RenewLocks = 20
	c.RenewTTL = 60 * time.Millisecond
	return c
}

func check(t *testing.T, rep *Report) {
	t.Helper()
	require.NotEqual(t, 0, len(rep.Results), "no results")
	for _, r := range rep.Results {
		assert.Len(t, r.Samples, rep.Config.Reps, "%s %s: %d samples, want %d", r.Scenario, r.Library, len(r.Samples), rep.Config.Reps)
		switch {
		case r.Scenario == Renew:
			assert.False(t, r.Metrics[MRenewSent].Median <= 0, "%s %s: no renewals: %+v", r.Scenario, r.Library, r.Metrics)
		case isHot(r.Scenario):
			assert.False(t, r.Metrics[MOpsPerSec].Median <= 0 || r.Metrics[MHandoffsPerSec].Median <= 0, "%s %s: no grants or handoffs: %+v", r.Scenario, r.Library, r.Metrics)
		default:
			assert.False(t, r.Metrics[MOpsPerSec].Median <= 0 || r.Metrics[MLatP50].Median <= 0, "%s %s: no ops: %+v", r.Scenario, r.Library, r.Metrics)
			assert.False(t, r.Metrics[MErrors].Max != 0, "%s %s: errors: %+v", r.Scenario, r.Library, r.Metrics)
		}
	}
	var out bytes.Buffer
	require.NoError(t, WriteOutputs(rep, Output{}, &out))
	assert.False(t, !strings.Contains(out.String(), "Uncontended") || !strings.Contains(out.String(), "Hot key"), "table lacks sections:\n%s", out.String())
	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, rep))
	var back Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	var md bytes.Buffer
	if err := WriteMarkdown(&md, rep); err != nil || !strings.Contains(md.String(), "| nodes |") {
		t.Errorf("markdown: %v\n%s", err, md.String())
	}
	if svg := SVG(rep); !strings.HasPrefix(svg, "<svg") || !strings.HasSuffix(svg, "</svg>\n") {
		t.Error("bad svg")
	}
}

func TestRunMiniredis(t *testing.T) {
	cfg := quickConfig()
	cfg.Miniredis = true
	rep, err := Run(context.Background(), cfg, rawLibs(), nil)
	require.NoError(t, err)
	assert.False(t, rep.Target.Real || !strings.Contains(rep.Target.Label, "NOT a real measurement"), "miniredis not labelled: %+v", rep.Target)
	check(t, rep)
}

func TestRunRealRedis(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	cfg := quickConfig()
	cfg.Scenarios = append(cfg.Scenarios, Quorum)
	cfg.QuorumSizes = []int{3, 5} // 5 is skipped: only 3 nodes
	cfg.Addr = srvs[0].Addr()
	cfg.Quorum = []string{srvs[1].Addr(), srvs[2].Addr()}
	libs := rawLibs()
	rep, err := Run(context.Background(), cfg, libs, nil)
	require.NoError(t, err)
	assert.False(t, !rep.Target.Real || rep.Target.RedisVersion == "", "target: %+v", rep.Target)
	check(t, rep)
	for _, r := range rep.Results {
		if r.Scenario == Uncontended {
			// SET NX + EVALSHA(GET, DEL): 2 sent, 4 server calls.
			if s := r.Metrics[MSentPerOp].Median; s < 1.9 || s > 2.1 {
				t.Errorf("sent/op = %v, want 2", s)
			}
			if s := r.Metrics[MCallsPerOp].Median; s < 1.9 || s > 5 { // 4, plus the INFO polling of a short run
				t.Errorf("redis calls/op = %v", s)
			}
			// Per command: one SET NX, one EVALSHA, its GET and DEL.
			for _, cmd := range []string{"set", "evalsha", "get", "del"} {
				if s := r.Metrics[MCmdCalls+cmd].Median; s < 0.9 || s > 1.1 {
					t.Errorf("%s calls/op = %v, want 1", cmd, s)
				}
				if s := r.Metrics[MCmdUsec+cmd].Median; s <= 0 {
					t.Errorf("%s µs/call = %v", cmd, s)
				}
			}
			if s := r.Metrics[MRedisCPUPerOp].Median; s <= 0 {
				t.Errorf("redis CPU µs/op = %v", s)
			}
		}
	}
}

func TestSpawn(t *testing.T) {
	redistest.Binary(t)
	procs, err := spawnRedis(2)
	require.NoError(t, err)
	for _, p := range procs {
		c := redis.NewClient(&redis.Options{Addr: p.Addr()})
		assert.NoError(t, c.Ping(context.Background()).Err())
		c.Close()
	}
	stopRedis(procs)
	for _, p := range procs {
		assert.False(t, p.Running(), "process still running")
		if _, err := os.Stat(p.Dir()); !os.IsNotExist(err) {
			t.Errorf("data directory %s left behind: %v", p.Dir(), err)
		}
	}
}

func TestHist(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, 1000 * time.Microsecond}} {
		got := h.quantile(c.q)
		if d := float64(got-c.want) / float64(c.want); d < -0.02 || d > 0.02 {
			t.Errorf("q%v = %v, want ~%v", c.q, got, c.want)
		}
	}
	assert.Equal(t, time.Duration(time.Millisecond), h.max, "max = %v", h.max)
	for _, d := range []time.Duration{0, 1, 63, 64, 65, 1 << 20, time.Hour} {
		if i := bucketOf(d); lowerBound(i) > d || (d < time.Hour && lowerBound(i+1) <= d) {
			t.Errorf("bucket of %v: [%v, %v)", d, lowerBound(i), lowerBound(i+1))
		}
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	require.NoError(t, c.Validate())
	c.Scenarios = []string{"nope"}
	c.Spawn, c.Addr = 1, "x:1"
	require.Error(t, c.Validate(), "want error")
}

type panicLocker struct{ rawLocker }

func (p *panicLocker) Obtain(context.Context, string, time.Duration) (Held, error) {
	panic("boom")
}

func TestLibraryPanicIsAFailedCell(t *testing.T) {
	cfg := quickConfig()
	cfg.Miniredis = true
	cfg.Scenarios = []string{Uncontended, Hotkey}
	libs := append(rawLibs(), Library{Name: "panics", Primary: true, New: func(n []redis.UniversalClient) (Locker, error) {
		return &panicLocker{rawLocker{rdb: n[0]}}, nil
	}})
	rep, err := Run(context.Background(), cfg, libs, nil)
	require.NoError(t, err)
	var failed int
	for _, r := range rep.Results {
		if r.Library == "panics" {
			assert.False(t, !strings.Contains(r.Note, "FAILED: panic: boom") || len(r.Samples) != 0, "%s: note %q, %d samples", r.Scenario, r.Note, len(r.Samples))
			failed++
		} else if len(r.Samples) != cfg.Reps {
			t.Errorf("%s %s: %d samples", r.Scenario, r.Library, len(r.Samples))
		}
	}
	assert.False(t, failed == 0 || len(Problems(rep)) != failed, "failed cells %d, problems %q", failed, Problems(rep))
}

func TestBackendConfig(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{Backend: BackendPostgres}, true},
		{Config{Backend: BackendRedis}, true},
		{Config{}, true},
		{Config{Backend: "etcd"}, false},
		{Config{Backend: BackendPostgres, Addr: "127.0.0.1:6379"}, false},
		{Config{DSN: "postgres://x"}, false},
	} {
		if err := c.cfg.validateBackend(); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
	libs := append(rawLibs(), Postgres()...)
	if got := filterBackend(libs, ""); len(got) != 2 {
		t.Errorf("redis libraries: %d, want the 2 raw ones", len(got))
	}
	for _, l := range filterBackend(libs, BackendPostgres) {
		assert.False(t, l.Postgres == nil || !strings.HasPrefix(l.Name, "pglock/"), "postgres library %s", l.Name)
	}
}

// The postgres backend runs pglock's uncontended and hot-key scenarios on
// the local PostgreSQL (skipped without one, unless
// REDISLOCK_REQUIRE_POSTGRES=1) and drops its schema.
func TestPostgresRun(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Backend = BackendPostgres
	cfg.Scenarios = []string{Uncontended, Hotkey, Renew}
	cfg.Workers, cfg.HotWorkers = []int{2}, []int{3}
	cfg.Duration, cfg.Warmup, cfg.Reps = 150*time.Millisecond, 20*time.Millisecond, 1
	// Leases long enough that a loaded machine cannot make a renewal late
	// (a 150 ms lease lost one renewal in a CI run beside other work): the
	// window is one lease, about three renewals per lock.
	cfg.RenewLocks, cfg.RenewTTL = 5, 2*time.Second
	cfg.Libs = []string{"pglock/linear"}
	rep, err := Run(context.Background(), cfg, Postgres(), nil)
	if err != nil {
		if os.Getenv("REDISLOCK_REQUIRE_POSTGRES") != "1" && strings.Contains(err.Error(), "lockbench: postgres") {
			t.Skipf("no PostgreSQL: %v", err)
		}
		t.Fatal(err)
	}
	if p := Problems(rep); len(p) > 0 || len(rep.Results) != 3 || !strings.HasPrefix(rep.Target.Label, "PostgreSQL ") {
		t.Fatalf("results %d, label %q, problems %v", len(rep.Results), rep.Target.Label, p)
	}
}

// -libs names that match no library, or libraries that no selected
// scenario measures, are refused with an error rather than a run that
// prints nothing; the help says only what the tool does.
func TestLibsSelectionRefused(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		libs      []string
		scenarios []string
		want      string
	}{
		{[]string{"nosuchlib"}, []string{Uncontended}, "matches no library"},
		{[]string{"raw/1ms", "nosuchlib"}, []string{Uncontended}, "matches no library"},
		{[]string{"raw/none"}, []string{Uncontended}, "measure none of"}, // not primary: hotkey only
	} {
		cfg := quickConfig()
		cfg.Addr = srv.Addr()
		cfg.Libs, cfg.Scenarios = tc.libs, tc.scenarios
		_, err := Run(context.Background(), cfg, rawLibs(), nil)
		assert.False(t, err == nil || !strings.Contains(err.Error(), tc.want), "-libs %v -scenarios %v: %v, want an error saying %q", tc.libs, tc.scenarios, err, tc.want)
	}
	var help bytes.Buffer
	inv := Invocation{Command: "go -C bench run .", Forms: []string{"go run example.com/bench@latest", "go -C bench run ."}}
	if code := Main(inv, []string{"-h"}, rawLibs(), io.Discard, &help); code != 0 {
		t.Fatalf("-h exited %d", code)
	}
	// The usage line shows every way to run the tool.
	assert.True(t, strings.HasPrefix(help.String(), "Usage:\n  go run example.com/bench@latest [flags]\n  go -C bench run . [flags]\n"), "the usage line does not show both ways to run the tool:\n%s", help.String())
	assert.False(t, strings.Contains(strings.ToUpper(help.String()), "FLUSHALL"), "the help warns of a FLUSHALL the tool never sends:\n%s", help.String())
}
