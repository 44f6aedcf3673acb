package redislockprom_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/extra/redislockprom"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/observe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup returns a Collector registered on a fresh registry, observing a
// Client of a fresh redis-server.
func setup(t *testing.T, opts ...redislockprom.Option) (*redislockprom.Collector, *prometheus.Registry, *redislock.Client, *redistest.Server) {
	t.Helper()
	col, err := redislockprom.New(opts...)
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	srv := redistest.Start(t)
	c := redislock.New(srv.Client(func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond }), redislock.WithObserver(col))
	t.Cleanup(func() { _ = c.Close() })
	return col, reg, c, srv
}

// value returns the value of the series name{labels}: a counter's or
// gauge's value, a histogram's sample count; 0 when there is no such series.
func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !hasLabel(m, labels[i], labels[i+1]) {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, name, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == v
		}
	}
	return false
}

func want(t *testing.T, reg *prometheus.Registry, w float64, name string, labels ...string) {
	t.Helper()
	if got := value(t, reg, name, labels...); got != w {
		t.Errorf("%s%v = %v, want %v", name, labels, got, w)
	}
}

func TestLint(t *testing.T) {
	col, _, c, _ := setup(t)
	ctx := context.Background()
	l, err := c.Obtain(ctx, "lint", time.Second)
	require.NoError(t, err)
	_ = l.Release(ctx)
	problems, err := testutil.CollectAndLint(col)
	require.NoError(t, err)
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestObtainRelease(t *testing.T) {
	_, reg, c, _ := setup(t)
	ctx := context.Background()
	l, err := c.Obtain(ctx, "job", time.Minute)
	require.NoError(t, err)
	want(t, reg, 1, "redislock_acquisitions_total", "outcome", "obtained")
	want(t, reg, 1, "redislock_acquire_duration_seconds", "outcome", "obtained")
	want(t, reg, 1, "redislock_held_locks")
	want(t, reg, 0, "redislock_waits_total")

	_, err = c.Obtain(ctx, "job", time.Minute)
	require.ErrorIs(t, err, redislock.ErrNotObtained, "second Obtain")
	want(t, reg, 1, "redislock_acquisitions_total", "outcome", "contended")

	require.NoError(t, l.Refresh(ctx, time.Minute))
	want(t, reg, 1, "redislock_refreshes_total", "kind", "call", "result", "ok")
	want(t, reg, 1, "redislock_refresh_duration_seconds", "kind", "call")

	require.NoError(t, l.Release(ctx))
	want(t, reg, 1, "redislock_releases_total", "result", "ok")
	want(t, reg, 1, "redislock_hold_duration_seconds", "result", "ok")
	want(t, reg, 0, "redislock_held_locks")
	want(t, reg, 0, "redislock_expirations_total")
	want(t, reg, 0, "redislock_stale_owner_total", "op", "release")
}

// waitSignal is an observer that reports WaitStart and Resubscribed events.
type waitSignal struct {
	wait  chan struct{}
	resub chan struct{}
}

func (w waitSignal) WaitStart(context.Context, observe.WaitEvent) { w.wait <- struct{}{} }
func (w waitSignal) Resubscribed(observe.SubscriptionEvent)       { w.resub <- struct{}{} }

func TestWait(t *testing.T) {
	col, err := redislockprom.New()
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	srv := redistest.Start(t)
	sig := waitSignal{wait: make(chan struct{}, 1), resub: make(chan struct{}, 1)}
	c := redislock.New(srv.Client(nil), redislock.WithObserver(col), redislock.WithObserver(sig))
	defer c.Close()
	holder := redislock.New(srv.Client(nil))
	defer holder.Close()

	ctx := context.Background()
	l, err := holder.Obtain(ctx, "hot", time.Minute)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		wl, err := c.Obtain(ctx, "hot", time.Minute, redislock.WithRetry(redislock.LinearBackoff(time.Second)), redislock.WithMaxWait(time.Minute))
		if err == nil {
			err = wl.Release(ctx)
		}
		got <- err
	}()
	<-sig.wait
	want(t, reg, 1, "redislock_waits_total")
	want(t, reg, 1, "redislock_waiting_calls")

	// The subscription of the waiter is cut: the Client replaces it.
	srv.WaitSubscribed(t, "redislock:{hot}:wake", 1)
	_, err = srv.Do("CLIENT", "KILL", "TYPE", "pubsub")
	require.NoError(t, err)
	<-sig.resub
	if v := value(t, reg, "redislock_resubscriptions_total"); v < 1 {
		t.Errorf("resubscriptions = %v, want >= 1", v)
	}

	require.NoError(t, l.Release(ctx))
	require.NoError(t, <-got)
	want(t, reg, 0, "redislock_waiting_calls")
	want(t, reg, 1, "redislock_wait_duration_seconds", "outcome", "obtained")
	want(t, reg, 1, "redislock_acquisitions_total", "outcome", "obtained")
}

func TestContendedWait(t *testing.T) {
	_, reg, c, srv := setup(t)
	holder := redislock.New(srv.Client(nil))
	defer holder.Close()
	ctx := context.Background()
	_, err := holder.Obtain(ctx, "busy", time.Minute)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = c.Obtain(wctx, "busy", time.Minute, redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)))
	require.ErrorIs(t, err, redislock.ErrNotObtained, "Obtain")
	want(t, reg, 1, "redislock_acquisitions_total", "outcome", "contended")
	want(t, reg, 1, "redislock_wait_duration_seconds", "outcome", "contended")
	want(t, reg, 0, "redislock_waiting_calls")
}

func TestExpiration(t *testing.T) {
	_, reg, c, _ := setup(t)
	ctx := context.Background()
	const ttl = 50 * time.Millisecond

	// Released after its lease: Release finds it gone.
	l, err := c.Obtain(ctx, "late", ttl)
	require.NoError(t, err)
	time.Sleep(ttl + 10*time.Millisecond) // the lease running out is the event
	require.ErrorIs(t, l.Refresh(ctx, ttl), redislock.ErrNotHeld, "Refresh")
	want(t, reg, 1, "redislock_refreshes_total", "kind", "call", "result", "not_held")
	want(t, reg, 1, "redislock_stale_owner_total", "op", "refresh")
	want(t, reg, 1, "redislock_expirations_total")
	require.ErrorIs(t, l.Release(ctx), redislock.ErrNotHeld, "Release")
	want(t, reg, 1, "redislock_releases_total", "result", "not_held")
	want(t, reg, 1, "redislock_expirations_total") // counted once

	// Never released: a scrape after its lease counts it.
	_, err = c.Obtain(ctx, "forgotten", ttl)
	require.NoError(t, err)
	obtained := time.Now()
	want(t, reg, 1, "redislock_held_locks")
	time.Sleep(time.Until(obtained.Add(ttl + time.Millisecond)))
	want(t, reg, 0, "redislock_held_locks")
	want(t, reg, 2, "redislock_expirations_total")
}

func TestLoss(t *testing.T) {
	col, reg, c, srv := setup(t)
	ctx := context.Background()

	// A renewal finds the lock gone (someone deleted it).
	err := c.Run(ctx, "stolen", 300*time.Millisecond, func(ctx context.Context, l *redislock.Lock) error {
		if _, err := srv.Do("DEL", "redislock:{stolen}"); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	})
	require.ErrorIs(t, err, redislock.ErrLockLost, "Run")
	_ = c.Close() // Run released the lost lock in the background
	want(t, reg, 1, "redislock_locks_lost_total", "reason", "not_held")
	want(t, reg, 1, "redislock_refreshes_total", "kind", "renewal", "result", "not_held")
	want(t, reg, 1, "redislock_expirations_total")
	want(t, reg, 0, "redislock_held_locks")
	// Run's release after the loss is no stale owner's.
	want(t, reg, 1, "redislock_releases_total", "result", "not_held")
	want(t, reg, 0, "redislock_stale_owner_total", "op", "release")
	want(t, reg, 0, "redislock_stale_owner_total", "op", "refresh")

	// Renewals cannot get through: the server is paused past the validity
	// (and the release after it, which Run hands to the background: the
	// server resumes once that release failed).
	c = redislock.New(srv.Client(func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond }), redislock.WithObserver(col))
	defer c.Close()
	err = c.Run(ctx, "paused", 300*time.Millisecond, func(ctx context.Context, l *redislock.Lock) error {
		srv.Pause()
		<-ctx.Done()
		return nil
	})
	redistest.Eventually(t, 10*time.Second, "the background release failed", func() bool {
		return value(t, reg, "redislock_releases_total", "result", "error") > 0
	})
	srv.Resume()
	_ = c.Close()
	require.ErrorIs(t, err, redislock.ErrLockLost, "Run")
	want(t, reg, 1, "redislock_locks_lost_total", "reason", "lease_expired")
	if v := value(t, reg, "redislock_refreshes_total", "kind", "renewal", "result", "error"); v < 1 {
		t.Errorf("failed renewals = %v, want >= 1", v)
	}
	if v := value(t, reg, "redislock_node_failures_total", "node", "0", "op", "refresh"); v < 1 {
		t.Errorf("node failures = %v, want >= 1", v)
	}
	want(t, reg, 1, "redislock_releases_total", "result", "error")
}

func TestNodeFailures(t *testing.T) {
	col, err := redislockprom.New()
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	srvs := redistest.StartN(t, 3)
	var rdbs []redis.UniversalClient
	for _, s := range srvs {
		rdbs = append(rdbs, s.Client(func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 }))
	}
	c, err := redislock.NewQuorum(rdbs, redislock.WithObserver(col))
	require.NoError(t, err)
	defer c.Close()
	srvs[2].Kill()
	ctx := context.Background()
	l, err := c.Obtain(ctx, "q", 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	if err := c.Close(); err != nil { // waits for the dead node's calls
		t.Fatal(err)
	}
	if v := value(t, reg, "redislock_node_failures_total", "node", "2", "op", "obtain"); v != 1 {
		t.Errorf("node 2 obtain failures = %v, want 1", v)
	}
	want(t, reg, 0, "redislock_node_failures_total", "node", "0")
	if v := value(t, reg, "redislock_node_last_failure_timestamp_seconds", "node", "2"); v < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("last failure of node 2 = %v", v)
	}
}

func TestStaleFenceAndCleanup(t *testing.T) {
	col, reg, c, _ := setup(t)
	ctx := context.Background()
	st := c.Store()
	require.NoError(t, st.Put(ctx, "rec", []byte("new"), 10, 0))
	require.ErrorIs(t, st.Put(ctx, "rec", []byte("old"), 9, 0), redislock.ErrStaleFence, "stale Put")
	want(t, reg, 1, "redislock_stale_owner_total", "op", "write")

	// A failed background clean-up cannot be caused on demand: the event
	// itself is given.
	col.CleanupFailed(ctx, observe.CleanupEvent{Key: "k", Err: errors.New("x")})
	want(t, reg, 1, "redislock_cleanup_failures_total")
}

func TestKeyLabel(t *testing.T) {
	_, reg, c, _ := setup(t, redislockprom.WithKeyLabel())
	ctx := context.Background()
	l, err := c.Obtain(ctx, "nightly", time.Minute)
	require.NoError(t, err)
	want(t, reg, 1, "redislock_acquisitions_total", "outcome", "obtained", "key", "nightly")
	want(t, reg, 1, "redislock_held_locks", "key", "nightly")
	_ = l.Release(ctx)
	want(t, reg, 1, "redislock_releases_total", "result", "ok", "key", "nightly")
}

// No series carries a key unless asked for, and none ever carries a token.
func TestNoKeyNoToken(t *testing.T) {
	_, reg, c, _ := setup(t)
	ctx := context.Background()
	l, err := c.Obtain(ctx, "secret-key", time.Minute)
	require.NoError(t, err)
	token := l.Token()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	_ = l.Release(ctx)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				assert.False(t, lp.GetName() == "key" || strings.Contains(lp.GetValue(), "secret-key") || strings.Contains(lp.GetValue(), token), "%s has label %s=%q", mf.GetName(), lp.GetName(), lp.GetValue())
			}
		}
	}
}

func TestInvalidOptions(t *testing.T) {
	for name, o := range map[string]redislockprom.Option{
		"namespace":   redislockprom.WithNamespace("bad-name"),
		"no buckets":  redislockprom.WithLatencyBuckets(),
		"unsorted":    redislockprom.WithWaitBuckets(1, 0.5),
		"duplicate":   redislockprom.WithHoldBuckets(1, 1),
		"const label": redislockprom.WithConstLabels(prometheus.Labels{"key": "x"}),
	} {
		_, err := redislockprom.New(o)
		assert.ErrorIs(t, err, redislock.ErrInvalidArgument, "%s, want ErrInvalidArgument", name)
	}
}
