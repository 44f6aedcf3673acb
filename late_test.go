package redislock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// A grant or refresh whose reply comes back after its validity is refused
// with ErrGrantExpired: the reply is held back by the proxy until the
// validity (TTL 1 s, drift factor 0.9: 98 ms from the request) has passed
// for sure, while the key lives on in Redis for the TTL. The late grant,
// and the lock of a late refresh, are released.
func TestLateReplyRefused(t *testing.T) {
	if !redistest.Available(t) {
		return
	}
	srv := redistest.Start(t)
	p := redistest.StartProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	admin := srv.Client(nil)
	const ttl = time.Second
	c := newClient(t, rdb, redislock.WithDriftFactor(0.9), redislock.WithNodeTimeout(time.Minute))
	ctx := ctxT(t, 30*time.Second)
	validity := ttl - time.Duration(0.9*float64(ttl)) - 2*time.Millisecond

	// late runs op with the replies held back until the validity of a
	// request sent now has passed.
	late := func(op func() error) error {
		t.Helper()
		sent := p.HoldReplies()
		done := make(chan error, 1)
		go func() { done <- op() }()
		at := <-sent // the call started before its request got here
		time.Sleep(time.Until(at.Add(validity + time.Millisecond)))
		p.Let()
		return <-done
	}

	warm, err := c.Obtain(ctx, "late", ttl) // loads the scripts: one round trip each
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var l *redislock.Lock
	err = late(func() (err error) {
		l, err = c.Obtain(ctx, "late", ttl)
		return err
	})
	if !errors.Is(err, redislock.ErrGrantExpired) || l != nil {
		t.Fatalf("Obtain with a late reply = %v, %v, want ErrGrantExpired", l, err)
	}
	// The error says why: how long the call took, and that a longer TTL
	// leaves room for it.
	if msg := err.Error(); !strings.Contains(msg, "took") || !strings.Contains(msg, "longer TTL") {
		t.Fatalf("ErrGrantExpired gives no hint: %q", msg)
	}
	if v := admin.Get(ctx, redislock.DefaultPrefix+"{late}").Val(); !strings.HasPrefix(v, "~:") {
		t.Fatalf("after the late grant the lock key holds %q, want it released", v)
	}

	l, err = c.Obtain(ctx, "late", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := late(func() error { return l.Refresh(ctx, ttl) }); !errors.Is(err, redislock.ErrGrantExpired) {
		t.Fatalf("Refresh with a late reply = %v, want ErrGrantExpired", err)
	}
	if !l.ValidUntil().IsZero() {
		t.Fatalf("after a late refresh ValidUntil = %v, want zero (not held)", l.ValidUntil())
	}
	if v := admin.Get(ctx, redislock.DefaultPrefix+"{late}").Val(); !strings.HasPrefix(v, "~:") {
		t.Fatalf("after the late refresh the lock key holds %q, want it released", v)
	}
}
