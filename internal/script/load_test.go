package script

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/redistest"
)

// The loading runs where SHA-1 is refused: the TestLoad tests run again in
// a child process of the test binary under GODEBUG=fips140=only. A digest
// computed in the process (go-redis' NewScript at package init, as before)
// panics there.
func TestLoadFIPSOnly(t *testing.T) {
	if redistest.FIPSOnly() {
		t.Skip("the child: already under fips140=only")
	}
	if !redistest.Available(t) {
		t.Skip("the TestLoad tests need redis-server")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoad", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=only")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the TestLoad tests under GODEBUG=fips140=only:\n%s", out)
	for _, name := range []string{"TestLoadByServerDigest", "TestLoadAskFails", "TestLoadPipelined", "TestLoadDeferred"} {
		assert.Contains(t, string(out), "--- PASS: "+name+" ", "under fips140=only:\n%s", out)
	}
}

// recorder is a go-redis hook that records the script commands its client
// sends, in pipelines too: "eval", "evalsha", and "digest" for the EVAL
// that asks for a digest (digestOf).
type recorder struct {
	mu    sync.Mutex
	names []string
}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.record(cmd)
		return next(ctx, cmd)
	}
}

func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			r.record(cmd)
		}
		return next(ctx, cmds)
	}
}

func (r *recorder) record(cmd redis.Cmder) {
	name := strings.ToLower(cmd.Name())
	if name != "eval" && name != "evalsha" {
		return
	}
	if args := cmd.Args(); name == "eval" && len(args) > 1 && fmt.Sprint(args[1]) == digestOf {
		name = "digest"
	}
	r.mu.Lock()
	r.names = append(r.names, name)
	r.mu.Unlock()
}

// take returns the commands recorded since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := r.names
	r.names = nil
	return names
}

// counting is a script that counts its runs in KEYS[1]: a call that ran it
// twice would show. Each test makes its own (a digest is learned once per
// Script), made unique by name.
func counting(name string) string {
	return "-- " + name + "\nreturn redis.call('incr', KEYS[1])"
}

// recorded returns a client of srv whose script commands rec records.
func recorded(srv *redistest.Server, rec *recorder, opts func(*redis.Options)) *redis.Client {
	rdb := srv.Client(opts)
	rdb.AddHook(rec)
	return rdb
}

// A script is known by the digest a server names, the one SCRIPT LOAD
// answers: its first call sends EVAL, then asks for the digest; every
// later call is one EVALSHA, and after a SCRIPT FLUSH one EVALSHA and one
// EVAL, which loads it again. Each call runs the script once. So through
// the hot path's direct calls, Script.Run on the client, and Script.Run on
// anything else (an AutoPipeliner).
func TestLoadByServerDigest(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type call func(rdb *redis.Client, key string) (int64, error)
	for name, newCall := range map[string]func(s *Script) call{
		"direct": func(s *Script) call {
			f := &fast{script: s}
			return func(rdb *redis.Client, key string) (int64, error) {
				return f.runInt(ctx, rdb, 1, f.args(Box(key), 0))
			}
		},
		"Run": func(s *Script) call {
			return func(rdb *redis.Client, key string) (int64, error) {
				return s.Run(ctx, rdb, []string{key}).Int64()
			}
		},
		"Run on an AutoPipeliner": func(s *Script) call {
			return func(rdb *redis.Client, key string) (int64, error) {
				ap, err := rdb.AutoPipeline()
				if err != nil {
					return 0, err
				}
				return s.Run(ctx, ap, []string{key}).Int64()
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			rdb := recorded(srv, rec, nil)
			s := newScript(counting(t.Name()))
			run := newCall(s)
			key := t.Name()
			runs := int64(0)
			step := func(want ...string) {
				t.Helper()
				n, err := run(rdb, key)
				require.NoError(t, err)
				runs++
				require.Equal(t, runs, n, "the script ran once per call")
				require.Equal(t, want, rec.take())
			}
			step("eval", "digest")
			require.Equal(t, srv.Client(nil).ScriptLoad(ctx, s.src).Val(), s.Digest(), "the digest SCRIPT LOAD names")
			step("evalsha")
			step("evalsha")
			require.NoError(t, srv.Client(nil).ScriptFlush(ctx).Err())
			step("evalsha", "eval")
			step("evalsha")
		})
	}
}

// A failed ask for the digest (here a client without EVAL: its calls fail
// too) is not repeated for askPause: calls send EVAL alone; then a client
// that gets the digest gets it for all.
func TestLoadAskFails(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := srv.Do("ACL", "SETUSER", "noeval", "on", ">pw", "~*", "&*", "+@all", "-eval", "-evalsha")
	require.NoError(t, err)
	rec := &recorder{}
	limited := recorded(srv, rec, func(o *redis.Options) { o.Username, o.Password = "noeval", "pw" })
	full := recorded(srv, rec, nil)
	s := newScript(counting(t.Name()))
	for i, want := range [][]string{{"eval", "digest"}, {"eval"}, {"eval"}} {
		err := s.Run(ctx, limited, []string{"k"}).Err()
		require.True(t, redis.HasErrorPrefix(err, "NOPERM"), "call %d: %v", i+1, err)
		require.Equal(t, want, rec.take(), "call %d", i+1)
	}
	_, err = s.Run(ctx, full, []string{"k"}).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"eval"}, rec.take(), "asked within askPause")
	s.ask.Store(time.Now().Add(-time.Second).UnixNano()) // as once askPause has passed
	_, err = s.Run(ctx, full, []string{"k"}).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"eval", "digest"}, rec.take())
	_, err = s.Run(ctx, full, []string{"k"}).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"evalsha"}, rec.take())
}

// Renewal's pipeline (Script.Run does not work in one) sends EVAL while the
// digest is unknown and asks for it after, then EVALSHA; after a SCRIPT
// FLUSH each batch is sent again with EVAL on its own.
func TestLoadPipelined(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := &recorder{}
	rdb := recorded(srv, rec, nil)
	s := newScript(batchRefresh.src)
	batches := []Batch{{Keys: []string{"a"}, Tokens: []string{"ta"}}, {Keys: []string{"b"}, Tokens: []string{"tb"}}}
	require.NoError(t, rdb.Set(ctx, "a", "ta:1", time.Minute).Err())
	step := func(want ...string) {
		t.Helper()
		batchPipelined(ctx, rdb, s, 60000, batches)
		for _, b := range batches {
			require.NoError(t, b.Err)
		}
		require.Equal(t, []BatchStatus{BatchRenewed}, batches[0].Status)
		require.Equal(t, []BatchStatus{BatchNotHeld}, batches[1].Status)
		require.Equal(t, want, rec.take())
	}
	step("eval", "eval", "digest")
	step("evalsha", "evalsha")
	require.NoError(t, srv.Client(nil).ScriptFlush(ctx).Err())
	step("evalsha", "evalsha", "eval", "eval")
	step("evalsha", "evalsha")
}

// deferred is a Deferred that always answers in time: a batched call's
// Scripter.
type deferred struct{ *redis.Client }

func (deferred) Late() bool { return false }

// A batched call (a Deferred) never asks for the digest: it sends EVAL
// until a call on the client itself has learned it, then EVALSHA.
func TestLoadDeferred(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := &recorder{}
	rdb := recorded(srv, rec, nil)
	f := newFast(counting(t.Name()))
	call := func(rdb redis.Scripter, want ...string) {
		t.Helper()
		_, err := f.runInt(ctx, rdb, 1, f.args(Box("k"), 0))
		require.NoError(t, err)
		require.Equal(t, want, rec.take())
	}
	call(deferred{rdb}, "eval")
	call(deferred{rdb}, "eval")
	call(rdb, "eval", "digest")
	call(deferred{rdb}, "evalsha")
	_, err := f.script.Run(ctx, deferred{rdb}, []string{"k"}).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"evalsha"}, rec.take())
}
