package redislock_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stallTimeout is the go-redis ReadTimeout of the clients that talk to a
// stalled server: far longer than any bound the tests expect, so that a
// call that waits for go-redis instead of its own bound cannot pass.
const stallTimeout = 30 * time.Second

// stalledClient returns a go-redis client of srv with go-redis' default
// context handling (ContextTimeoutEnabled false) and the long stallTimeout.
func stalledClient(srv *redistest.Server) *redis.Client {
	return srv.Client(func(o *redis.Options) {
		o.ReadTimeout, o.WriteTimeout = stallTimeout, stallTimeout
	})
}

// within fails t unless f returns an error, and returns within bound of
// its start (a bound far below stallTimeout: loose enough for a loaded
// machine).
func within(t *testing.T, what string, bound time.Duration, f func() error) {
	t.Helper()
	start := time.Now()
	err := f()
	took := time.Since(start)
	assert.Error(t, err, "%s against a stalled server: no error", what)
	assert.LessOrEqual(t, took, bound, "%s against a stalled server took, want at most %v: %v", what, bound, err)
}

// Against a server that accepts connections and never answers (paused with
// SIGSTOP), every call returns within its context's deadline (or, for
// Release and Close, the release timeout), whatever go-redis' own options.
// Before: each waited for go-redis' ReadTimeout.
func TestCallsBoundedByContext(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := stalledClient(srv)
	const release = 300 * time.Millisecond
	c := newClient(t, rdb, redislock.WithReleaseTimeout(release))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	held, err := c.Obtain(ctx, "held", time.Minute)
	require.NoError(t, err)
	other, err := c.Obtain(ctx, "other", time.Minute)
	require.NoError(t, err)
	srv.Pause()
	t.Cleanup(srv.Resume) // before the clients close: the stalled calls end
	const deadline = 300 * time.Millisecond
	bound := deadline + 2*time.Second
	call := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		within(t, what, bound, func() error {
			cctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			err := f(cctx)
			assert.False(t, err != nil && !errors.Is(err, context.DeadlineExceeded), "%s: %v, want an error matching context.DeadlineExceeded", what, err)
			return err
		})
	}
	call("Obtain", func(ctx context.Context) error { _, err := c.Obtain(ctx, "k", time.Minute); return err })
	call("Obtain, waiting", func(ctx context.Context) error {
		_, err := c.Obtain(ctx, "held", time.Minute, redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)))
		return err
	})
	call("ObtainMulti", func(ctx context.Context) error {
		_, err := c.ObtainMulti(ctx, []string{"a", "b"}, time.Minute)
		return err
	})
	call("Run", func(ctx context.Context) error {
		return c.Run(ctx, "r", time.Minute, func(context.Context, *redislock.Lock) error { return nil })
	})
	call("Refresh", func(ctx context.Context) error { return held.Refresh(ctx, time.Minute) })
	call("TTL", func(ctx context.Context) error { _, err := held.TTL(ctx); return err })
	call("Inspect", func(ctx context.Context) error { _, err := c.Inspect(ctx, "held"); return err })
	call("Store.Put", func(ctx context.Context) error { return c.Store().Put(ctx, "rec", []byte("v"), 1, 0) })
	call("Store.Get", func(ctx context.Context) error { _, err := c.Store().Get(ctx, "rec"); return err })
	call("Store.Delete", func(ctx context.Context) error { return c.Store().Delete(ctx, "rec", 1) })
	call("FencedSet", func(ctx context.Context) error { return redislock.FencedSet(ctx, rdb, "fs", "v", 1, 0) })
	call("FencedGet", func(ctx context.Context) error { _, _, err := redislock.FencedGet(ctx, rdb, "fs"); return err })
	// Release runs detached from its ctx, bounded by the release timeout
	// (a ctx that cannot end, context.Background(), leaves the bound to
	// go-redis, at no cost).
	within(t, "Release", release+2*time.Second, func() error { return other.Release(ctx) })
	within(t, "Close", release+2*time.Second, func() error {
		_ = c.Close()
		return errors.New("closed") // Close has no error to report
	})
}

// A quorum with a stalled majority answers within the context's deadline.
func TestQuorumBoundedByContext(t *testing.T) {
	t.Parallel()
	srvs := redistest.StartN(t, 3)
	var rdbs []redis.UniversalClient
	for _, s := range srvs {
		rdbs = append(rdbs, stalledClient(s))
	}
	c, err := redislock.NewQuorum(rdbs, redislock.WithReleaseTimeout(300*time.Millisecond), redislock.WithNodeTimeout(time.Minute))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	for _, s := range srvs[:2] {
		s.Pause()
		t.Cleanup(s.Resume)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	within(t, "quorum Obtain", 2300*time.Millisecond, func() error {
		_, err := c.Obtain(ctx, "q", time.Minute)
		return err
	})
	within(t, "quorum Close", 2300*time.Millisecond, func() error {
		_ = c.Close()
		return errors.New("closed")
	})
}

// WithReplicas' WAIT never outlives the context or the lease it protects,
// however long a timeout it was given.
func TestReplicaWaitBounded(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t) // no replicas: WAIT 1 waits its whole timeout
	c := newClient(t, stalledClient(srv), redislock.WithReplicas(1, time.Duration(math.MaxInt64)))
	const ttl = 500 * time.Millisecond
	within(t, "Obtain, no context deadline", ttl+2*time.Second, func() error {
		_, err := c.Obtain(context.Background(), "w", ttl)
		var re *redislock.ReplicaError
		assert.ErrorAs(t, err, &re, "Obtain, want a *ReplicaError")
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	within(t, "Obtain, context deadline", 2300*time.Millisecond, func() error {
		_, err := c.Obtain(ctx, "w", time.Minute)
		return err
	})
}
