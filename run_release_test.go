package redislock_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/observe"
)

// deadServer is a redis-server that the test kills, reached by a client
// whose connections to it are refused, and once the test closes the gate,
// refused only when the test lets them go: a release that waited for the
// dead server would wait for the watchdog.
func deadServer(t *testing.T) (srv *redistest.Server, rdb *redis.Client, w *watchdog, slow func()) {
	srv = redistest.Start(t)
	gate := make(chan struct{})
	var gated atomic.Bool
	w = newWatchdog(t, 20*time.Second, func() { close(gate) })
	rdb = srv.Client(func(o *redis.Options) {
		o.MaxRetries = -1
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = patience, patience, patience, patience
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if gated.Load() {
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	})
	return srv, rdb, w, func() { gated.Store(true) }
}

// Redis killed while fn runs: fn's ctx is cancelled at ValidUntil, and Run
// returns ErrLockLost once fn returns, without waiting for a release on the
// dead server (that goes to the background; Close waits for it).
func TestRunReturnsWhenLockLost(t *testing.T) {
	srv, rdb, w, slow := deadServer(t)
	c := redislock.New(rdb, redislock.WithReleaseTimeout(patience))
	t.Cleanup(func() {
		w.release()
		_ = c.Close()
	})
	ctx := ctxT(t, 2*patience)
	err := c.Run(ctx, "dead", 500*time.Millisecond, func(ctx context.Context, l *redislock.Lock) error {
		srv.Kill()
		<-ctx.Done() // at ValidUntil at the latest
		slow()
		return nil
	})
	if !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("Run = %v, want ErrLockLost", err)
	}
	if w.fired.Load() {
		t.Fatal("Run waited for a release on the dead server")
	}
}

// failedRenewal tells when a renewal has failed.
type failedRenewal chan struct{}

func (f failedRenewal) RefreshStart(ctx context.Context, _ observe.RefreshStartEvent) context.Context {
	return ctx
}

func (f failedRenewal) RefreshDone(_ context.Context, e observe.RefreshDoneEvent) {
	if e.Err != nil && e.Renewal {
		select {
		case f <- struct{}{}:
		default:
		}
	}
}

// Redis unreachable when fn returns, the lock still valid: Run returns
// without waiting for the release.
func TestRunReturnsWhenRedisUnreachable(t *testing.T) {
	srv, rdb, w, slow := deadServer(t)
	failed := make(failedRenewal, 1)
	c := redislock.New(rdb, redislock.WithReleaseTimeout(patience), redislock.WithObserver(failed))
	t.Cleanup(func() {
		w.release()
		_ = c.Close()
	})
	ctx := ctxT(t, 2*patience)
	err := c.Run(ctx, "down", patience, func(ctx context.Context, l *redislock.Lock) error {
		srv.Kill()
		<-failed // a renewal did not get through; the lease is still valid
		slow()
		return ctx.Err()
	}, redislock.WithRefreshInterval(10*time.Millisecond))
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if w.fired.Load() {
		t.Fatal("Run waited for a release on the unreachable server")
	}
}
