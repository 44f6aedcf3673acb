package stampede_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease/leasetest"
	"github.com/redislock-go/redislock/stampede"
)

// A value in its early-refresh window is returned as it is, and one
// refresher across the Groups fills it again; the others keep the value.
func TestEarlyRefreshOneRefresher(t *testing.T) {
	t.Parallel()
	ev := watch()
	clock := leasetest.NewFakeClock(time.Time{})
	m := memory(leasetest.WithClock(clock))
	ctx := context.Background()
	var gen atomic.Int32
	refreshing := make(chan struct{})
	proceed := make(chan struct{})
	fill := func(context.Context) ([]byte, error) {
		if gen.Add(1) == 2 { // the refresh
			close(refreshing)
			<-proceed
			return []byte("v2"), nil
		}
		return []byte("v1"), nil
	}
	var errs sync.Map
	onErr := stampede.WithErrorHandler(func(key string, err error) { errs.Store(key, err) })
	opts := []stampede.Option{stampede.WithEarlyRefresh(2 * time.Second), onErr, ev.option()}
	gs := []*stampede.Group{newGroup(t, m, m, opts...), newGroup(t, m, m, opts...), newGroup(t, m, m, opts...)}
	if v, err := gs[0].Do(ctx, "k", 10*time.Second, fill); err != nil || string(v) != "v1" {
		t.Fatalf("first Do = %q, %v", v, err)
	}
	clock.Advance(9 * time.Second) // 1 s left: due for refresh
	if v, err := gs[0].Do(ctx, "k", 10*time.Second, fill); err != nil || string(v) != "v1" {
		t.Fatalf("Do in the refresh window = %q, %v; want the current value", v, err)
	}
	<-refreshing
	for _, g := range gs[1:] {
		if v, err := g.Do(ctx, "k", 10*time.Second, fill); err != nil || string(v) != "v1" {
			t.Fatalf("Do while another refreshes = %q, %v; want the current value", v, err)
		}
		if err := g.Close(); err != nil { // waits for its refresh attempt
			t.Fatal(err)
		}
	}
	close(proceed)
	ev.wait(t, stampede.EvStored, 2)
	if n := gen.Load(); n != 2 {
		t.Errorf("%d fills, want 2 (the first and one refresh)", n)
	}
	if n := ev.count(stampede.EvFill); n != 2 {
		t.Errorf("%d fills began, want 2", n)
	}
	g := newGroup(t, m, m, opts...)
	if v, err := g.Do(ctx, "k", 10*time.Second, fill); err != nil || string(v) != "v2" {
		t.Errorf("after the refresh: %q, %v; want v2", v, err)
	}
	errs.Range(func(k, v any) bool { t.Errorf("error handler: %v: %v", k, v); return true })
}

// A refresh that fails keeps the current value and reports the error.
func TestEarlyRefreshFailure(t *testing.T) {
	t.Parallel()
	clock := leasetest.NewFakeClock(time.Time{})
	m := memory(leasetest.WithClock(clock))
	ctx := context.Background()
	reported := make(chan error, 1)
	g := newGroup(t, m, m, stampede.WithEarlyRefresh(2*time.Second),
		stampede.WithErrorHandler(func(_ string, err error) { reported <- err }))
	_, err := g.Do(ctx, "k", 10*time.Second, func(context.Context) ([]byte, error) { return []byte("v1"), nil })
	require.NoError(t, err)
	clock.Advance(9 * time.Second)
	v, err := g.Do(ctx, "k", 10*time.Second, func(context.Context) ([]byte, error) { return nil, errFill })
	require.NoError(t, err, "Do in the refresh window = %q", v)
	require.Equal(t, "v1", string(v), "Do in the refresh window = %q, %v", v, err)
	select {
	case err := <-reported:
		assert.ErrorIs(t, err, errFill, "reported, want the fill's error")
	case <-time.After(waitBound):
		t.Fatal("the failed refresh was not reported")
	}
	if v, err := g.Do(ctx, "k", 10*time.Second, func(context.Context) ([]byte, error) { return nil, errFill }); err != nil || string(v) != "v1" {
		t.Errorf("after a failed refresh: %q, %v; want the value kept", v, err)
	}
}
