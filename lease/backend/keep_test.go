package backend_test

import (
	"context"
	"testing"
	"time"

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
