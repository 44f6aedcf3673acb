package redislock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// Waiters without a ctx deadline do not give up on a holder that is alive
// and renewing its lease (of 1 s: renewals that get through on a loaded
// machine) for several of the waiters' TTLs: the default wait limit is far
// longer than one TTL.
func TestWaitOutlivesRenewingHolder(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	renewed := newRenewals()
	holder := newClient(t, srv.Client(nil), redislock.WithObserver(renewed))
	waiters := newClient(t, srv.Client(nil))
	const ttl = 300 * time.Millisecond // the waiters'
	locked := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		err := holder.Run(context.Background(), "fill", time.Second, func(ctx context.Context, l *redislock.Lock) error {
			close(locked)
			// The fill: renewed until the lease reaches 2 s past now, six
			// of the waiters' TTLs.
			for end := time.Now().Add(2 * time.Second); !l.ValidUntil().After(end); {
				select {
				case <-renewed.ok:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
	<-locked
	errs := make(chan error, 8)
	for range cap(errs) {
		wg.Go(func() {
			l, err := waiters.Obtain(context.Background(), "fill", ttl, redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)))
			if err == nil {
				err = l.Release(context.Background())
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a waiter gave up on a live holder: %v", err)
		}
	}
}

// A wait limit that passes while the lease it saw is about to end does not
// end the wait before that lease does: a crashed holder's lock goes to the
// waiter.
func TestWaitLimitWaitsForLeaseEnd(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(nil))
	ctx := context.Background()
	if _, err := c.Obtain(ctx, "crashed", 600*time.Millisecond); err != nil { // never released
		t.Fatal(err)
	}
	l, err := c.Obtain(ctx, "crashed", time.Second,
		redislock.WithRetry(redislock.LinearBackoff(20*time.Millisecond)), redislock.WithMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("the waiter gave up on a lease about to end: %v", err)
	}
	_ = l.Release(ctx)
}

// At the wait limit, the error says so, matches ErrNotObtained and carries
// the remaining TTL seen: at once for a lease longer than the TTL asked
// for, after the lease seen has ended for a holder that renews it.
func TestWaitLimitError(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(nil))
	ctx := ctxT(t, 20*time.Second)
	check := func(err error, ttlAbove time.Duration) {
		t.Helper()
		var wl *redislock.WaitLimitError
		if !errors.Is(err, redislock.ErrNotObtained) || !errors.As(err, &wl) || wl.Limit != 50*time.Millisecond || wl.TTL <= ttlAbove {
			t.Fatalf("Obtain = %#v (%v), want a *WaitLimitError matching ErrNotObtained with the TTL seen", err, err)
		}
	}
	if _, err := c.Obtain(ctx, "long", time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := c.Obtain(context.Background(), "long", time.Second,
		redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)), redislock.WithMaxWait(50*time.Millisecond))
	check(err, 30*time.Second)

	renewed := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		renewed <- c.Run(ctx, "renewed", time.Second, func(ctx context.Context, l *redislock.Lock) error {
			<-stop
			return nil
		})
	}()
	eventually(t, 5*time.Second, "the holder", func() bool { return srv.Client(nil).Exists(ctx, redislock.DefaultPrefix+"{renewed}").Val() == 1 })
	_, err = c.Obtain(context.Background(), "renewed", time.Second,
		redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)), redislock.WithMaxWait(50*time.Millisecond))
	close(stop)
	check(err, 0)
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
}

// In quorum mode the error carries the longest remaining lease among the
// nodes that answered "held".
func TestQuorumWaitLimitError(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	c := q.client(t)
	ctx := ctxT(t, 20*time.Second)
	if _, err := c.Obtain(ctx, "qlong", time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := c.Obtain(context.Background(), "qlong", time.Second,
		redislock.WithRetry(redislock.LinearBackoff(10*time.Millisecond)), redislock.WithMaxWait(50*time.Millisecond))
	var wl *redislock.WaitLimitError
	if !errors.Is(err, redislock.ErrNotObtained) || !errors.As(err, &wl) || wl.TTL <= 30*time.Second {
		t.Fatalf("Obtain = %v, want a *WaitLimitError with the TTL seen", err)
	}
}
