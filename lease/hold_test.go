package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/leasetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// unreachable is a Lock whose backend cannot be reached: every Refresh
// fails without saying whether the grant is held.
type unreachable struct {
	lease.Lock
	mu    sync.Mutex
	until time.Time
}

var errDown = errors.New("backend down")

func (u *unreachable) ValidUntil() time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.until
}

func (u *unreachable) forget() {
	u.mu.Lock()
	u.until = time.Time{}
	u.mu.Unlock()
}
func (u *unreachable) Refresh(context.Context, time.Duration) error { return errDown }

// A Refresher whose renewals fail reports the loss LossLead (here 10 ms,
// 1% of the TTL) before ValidUntil, not at it: a timer due at ValidUntil
// fires after it.
func TestRefresherReportsBeforeValidUntil(t *testing.T) {
	t.Parallel()
	clock := leasetest.NewFakeClock(time.Time{})
	const ttl, interval = time.Second, 300 * time.Millisecond
	l := &unreachable{until: clock.Now().Add(ttl)}
	lost := make(chan error, 1)
	stop := lease.Refresher{Clock: clock, Lock: l}.Keep(ttl, interval, func(cause error) { lost <- cause })
	defer stop()
	lead := lease.LossLead(ttl, interval)
	if lead != 10*time.Millisecond {
		t.Fatalf("LossLead(%v, %v) = %v, want 1%% of the TTL", ttl, interval, lead)
	}
	clock.Advance(ttl - lead - time.Millisecond)
	select {
	case cause := <-lost:
		t.Fatalf("loss reported %v before ValidUntil: %v", lead+time.Millisecond, cause)
	default:
	}
	clock.Advance(time.Millisecond)
	select {
	case cause := <-lost:
		if !errors.Is(cause, lease.ErrLeaseExpired) || !errors.Is(cause, errDown) {
			t.Fatalf("cause = %v, want ErrLeaseExpired with the renewal's error", cause)
		}
	default:
		t.Fatalf("no loss reported %v before ValidUntil", lead)
	}
}

// A Lock that learns elsewhere that its grant is gone (a Refresh or TTL
// call of its holder: ValidUntil becomes the zero Time) is reported lost
// at the Refresher's next watchdog, not never.
func TestRefresherLockForgotten(t *testing.T) {
	t.Parallel()
	clock := leasetest.NewFakeClock(time.Time{})
	const ttl, interval = time.Second, 300 * time.Millisecond
	l := &unreachable{until: clock.Now().Add(ttl)}
	lost := make(chan error, 1)
	stop := lease.Refresher{Clock: clock, Lock: l}.Keep(ttl, interval, func(cause error) { lost <- cause })
	defer stop()
	l.forget()
	clock.Advance(ttl)
	select {
	case <-lost:
	default:
		t.Fatal("no loss reported for a lock whose ValidUntil became the zero Time")
	}
}

func TestLossLead(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ ttl, interval, want time.Duration }{
		{100 * time.Millisecond, 30 * time.Millisecond, 5 * time.Millisecond}, // at least 5 ms
		{10 * time.Millisecond, 3 * time.Millisecond, 750 * time.Microsecond}, // at most interval/4
		{10 * time.Second, 3 * time.Second, 100 * time.Millisecond},           // 1% of the TTL
		{100 * time.Millisecond, 96 * time.Millisecond, time.Millisecond},     // at most (ttl-interval)/4
	} {
		if got := lease.LossLead(c.ttl, c.interval); got != c.want {
			t.Errorf("LossLead(%v, %v) = %v, want %v", c.ttl, c.interval, got, c.want)
		}
	}
}

// kept is a Lock that renews itself, a lease.Keeper: Hold must use its
// Keep, never Refresh.
type kept struct {
	lease.Lock
	keeps chan time.Duration
}

func (k *kept) Keep(ttl, interval time.Duration, lost func(error)) func() {
	k.keeps <- interval
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
	// A Lock that merely wraps another (an interface field) is no Keeper.
	if _, ok := lease.Lock(struct{ lease.Lock }{l}).(lease.Keeper); ok {
		t.Fatal("a wrapper of a Keeper is a Keeper")
	}
}

// idleKeeper renews nothing and reports nothing, as the timers of a process
// that was stopped (SIGSTOP) and has just resumed.
type idleKeeper struct{}

func (idleKeeper) Keep(time.Duration, time.Duration, func(error)) func() { return func() {} }

// paused is a Lock whose holder was paused past its lease while fn ran.
type paused struct {
	*unreachable
	idleKeeper
}

func (p *paused) Release(context.Context) error { return lease.ErrNotHeld } // another holder has it

// RunLock reports the loss of a lock whose validity passed while fn ran,
// though no renewal had told it yet when fn returned.
func TestRunLockLeaseEndedDuringFn(t *testing.T) {
	t.Parallel()
	l := &paused{unreachable: &unreachable{until: time.Now().Add(time.Minute)}}
	err := lease.RunLock(context.Background(), l, time.Minute, func(context.Context) error {
		l.mu.Lock()
		l.until = time.Now().Add(-time.Millisecond) // paused past the lease
		l.mu.Unlock()
		return nil
	})
	if !errors.Is(err, lease.ErrLockLost) || !errors.Is(err, lease.ErrLeaseExpired) {
		t.Fatalf("RunLock after the lease ended during fn = %v, want ErrLockLost with ErrLeaseExpired", err)
	}
}
