package redislock_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// batchCallers is how many callers the batched tests run at once: far
// more than nodes.AutoPipelineAbove (16), so that most of their calls are
// batched through the deferred AutoPipeliner.
const batchCallers = 64

// batchConfigs are the AutoPipelineOptions the batched tests run with:
// go-redis' default (1 batch in flight, in submit order) and those
// ExampleWithAutoPipeline recommends (2 batches in flight, unordered).
var batchConfigs = []struct {
	name string
	ap   *redis.AutoPipelineOptions
}{
	{"default", nil},
	{"unordered", &redis.AutoPipelineOptions{MaxConcurrentBatches: 2, Unordered: true, MaxFlushDelay: 20 * time.Microsecond}},
}

// eachBatchConfig runs f in a parallel subtest per batchConfigs entry,
// with a server of its own and a client of it with those options.
func eachBatchConfig(t *testing.T, f func(t *testing.T, srv *redistest.Server, opts func(*redis.Options))) {
	for _, bc := range batchConfigs {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			f(t, redistest.Start(t), func(o *redis.Options) { o.AutoPipelineOptions = bc.ap })
		})
	}
}

// all runs f(i) on batchCallers goroutines at once and waits for them.
func all(f func(i int)) {
	var wg sync.WaitGroup
	for i := range batchCallers {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// Batched calls (many in flight) wait for their replies on their callers'
// goroutines: against a server that accepts and never answers, each
// returns at its ctx's end, at its node timeout, or (Release) at the
// release timeout, whatever go-redis' own timeouts; once the server
// answers again, every abandoned call is settled: what a late Obtain
// granted is released, and a late Release has released.
func TestBatchedCallsBounded(t *testing.T) {
	t.Parallel()
	eachBatchConfig(t, checkBatchedCallsBounded)
}

func checkBatchedCallsBounded(t *testing.T, srv *redistest.Server, opts func(*redis.Options)) {
	rdb := srv.Client(func(o *redis.Options) {
		o.ReadTimeout, o.WriteTimeout = stallTimeout, stallTimeout
		opts(o)
	})
	const short = 300 * time.Millisecond
	bound := short + 2*time.Second
	c := newClient(t, rdb, redislock.WithReleaseTimeout(short))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := srv.Client(nil)

	// settled waits, once the server answers again, for every abandoned
	// call to be settled, and checks that no lock of prefix is held.
	settled := func(t *testing.T, prefix string) {
		t.Helper()
		srv.Resume()
		require.Eventually(t, func() bool { return redislock.Abandoned(c) == 0 }, time.Minute, 5*time.Millisecond, "abandoned calls settled")
		for i := range batchCallers {
			k := redislock.LockKey(prefix + strconv.Itoa(i))
			assert.False(t, held(ctx, admin, k), "%s is held after its abandoned calls were settled", k)
		}
	}
	// bounded checks that call, against the stalled server, returned an
	// error matching context.DeadlineExceeded within bound.
	bounded := func(t *testing.T, what string, call func() error) {
		start := time.Now()
		err := call()
		assert.LessOrEqual(t, time.Since(start), bound, "%s against a stalled server took, want at most %v", what, bound)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "%s against a stalled server, want an error matching context.DeadlineExceeded", what)
	}

	// release obtains a lock of prefix for each caller, then releases them
	// all on the stalled server.
	release := func(t *testing.T, prefix string) {
		locks := make([]*redislock.Lock, batchCallers)
		all(func(i int) {
			l, err := c.Obtain(ctx, prefix+strconv.Itoa(i), time.Minute)
			assert.NoError(t, err)
			locks[i] = l
		})
		if t.Failed() {
			return
		}
		srv.Pause()
		t.Cleanup(srv.Resume)
		all(func(i int) { bounded(t, "Release", func() error { return locks[i].Release(ctx) }) })
		require.True(t, redislock.Deferring(c), "no call was batched through the deferred auto-pipeliner: the test exercised nothing")
		settled(t, prefix)
	}
	// The first releases find release.lua not loaded (NOSCRIPT): the
	// worker that settles each goes on with EVAL, as the call would have.
	t.Run("Release, script not loaded", func(t *testing.T) { release(t, "unloaded-") })
	t.Run("Release", func(t *testing.T) { release(t, "rel-") })
	t.Run("Obtain, ctx", func(t *testing.T) {
		srv.Pause()
		t.Cleanup(srv.Resume)
		all(func(i int) {
			bounded(t, "Obtain", func() error {
				cctx, cancel := context.WithTimeout(ctx, short)
				defer cancel()
				_, err := c.Obtain(cctx, "ctx-"+strconv.Itoa(i), time.Minute)
				return err
			})
		})
		settled(t, "ctx-")
	})
	t.Run("Obtain, node timeout", func(t *testing.T) {
		srv.Pause()
		t.Cleanup(srv.Resume)
		never, cancel := context.WithCancel(ctx) // can end, never does
		defer cancel()
		all(func(i int) {
			bounded(t, "Obtain", func() error {
				_, err := c.Obtain(never, "nt-"+strconv.Itoa(i), time.Minute, redislock.WithNodeTimeout(short))
				return err
			})
		})
		settled(t, "nt-")
	})
}

// SCRIPT FLUSH while batched calls run: each falls back from EVALSHA to
// EVAL, through the deferred AutoPipeliner as on the client.
func TestBatchedScriptFlush(t *testing.T) {
	t.Parallel()
	eachBatchConfig(t, checkBatchedScriptFlush)
}

func checkBatchedScriptFlush(t *testing.T, srv *redistest.Server, opts func(*redis.Options)) {
	rdb := srv.Client(opts)
	admin := srv.Client(nil)
	c := newClient(t, rdb)
	ctx := testkit.Context(t)
	for round := range 5 {
		require.NoError(t, admin.ScriptFlush(ctx).Err())
		all(func(i int) {
			key := "flush-" + strconv.Itoa(i)
			l, err := c.Obtain(ctx, key, time.Minute)
			if err != nil {
				assert.Fail(t, fmt.Sprintf("round %d: Obtain: %v", round, err))
				return
			}
			assert.NoError(t, l.Release(ctx), "round %d: Release", round)
		})
	}
	require.True(t, redislock.Deferring(c), "no call was batched through the deferred auto-pipeliner: the test exercised nothing")
}
