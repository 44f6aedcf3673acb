package backend_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
	"github.com/redislock-go/redislock/lease/leasetest"
)

// kept is a Lock whose backend renews it itself: Hold must use its Keeper,
// never Refresh.
type kept struct {
	lease.Lock
	backend.Keeping
	keeps chan time.Duration
}

type keeperOf struct{ k *kept }

func (k keeperOf) Keep(ttl, interval time.Duration, lost func(error)) func() {
	k.k.keeps <- interval
	return func() {}
}

func (k *kept) Refresh(context.Context, time.Duration) error {
	panic("Refresh called on a Lock with a Keeper")
}

func TestHoldUsesKeeper(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := leasetest.NewMemory()
	l, err := m.Obtain(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	k := &kept{Lock: l, keeps: make(chan time.Duration, 1)}
	k.Keeping = backend.KeepWith(keeperOf{k})
	if backend.KeeperOf(k) == nil {
		t.Fatal("KeeperOf a Lock with a Keeping is nil")
	}
	h, err := lease.Hold(ctx, k, time.Minute, lease.WithRefreshInterval(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case iv := <-k.keeps:
		if iv != time.Second {
			t.Fatalf("Keep interval %v, want 1s", iv)
		}
	default:
		t.Fatal("Hold did not call the Lock's Keeper")
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A Lock that merely wraps another (an interface field) has no Keeper.
	if backend.KeeperOf(struct{ lease.Lock }{l}) != nil {
		t.Fatal("a wrapper without Keeping has a Keeper")
	}
}

// A ReleaseWatch reports a Release to the Keeps under way once, with
// lease.ErrReleased, and to a Keep that starts after it at once (renewing
// nothing); the Keep's own reports after that, or anything after its stop,
// are dropped.
func TestReleaseWatch(t *testing.T) {
	t.Parallel()
	var w backend.ReleaseWatch
	var causes []error
	var inner func(error)
	stops := 0
	stop := w.Keep(func(cause error) { causes = append(causes, cause) }, func(lost func(error)) func() {
		inner = lost
		return func() { stops++ }
	})
	w.Released()
	require.Len(t, causes, 1)
	assert.ErrorIs(t, causes[0], lease.ErrReleased)
	inner(lease.ErrNotHeld) // the renewal after the Release finds it gone
	assert.Len(t, causes, 1, "reported twice")
	stop()
	assert.Equal(t, 1, stops)

	started := false
	w.Keep(func(cause error) { causes = append(causes, cause) }, func(func(error)) func() {
		started = true
		return func() {}
	})()
	assert.False(t, started, "a Keep of a released Lock renewed")
	require.Len(t, causes, 2)
	assert.ErrorIs(t, causes[1], lease.ErrReleased)

	var other backend.ReleaseWatch
	n := 0
	other.Keep(func(error) { n++ }, func(func(error)) func() { return func() {} })()
	other.Released()
	assert.Zero(t, n, "reported after stop")
}
