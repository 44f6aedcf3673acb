package wake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/wake"
	"github.com/redislock-go/redislock/lease/leasetest"
)

// The subscription connection, on real servers: confirmation, messages,
// the last waiter's unsubscribe, a replaced connection; the waits that
// time out (Confirmed, the pause before a reconnect) run on a fake clock.

// await waits for an event the test caused, failing after a minute.
func await(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("not within a minute: %s", what)
	}
}

func confirmed(t *testing.T, s *wake.Sub[none, none]) {
	t.Helper()
	if ok, err := s.Confirmed(context.Background(), time.Minute); !ok || err != nil {
		t.Fatalf("subscription not confirmed: %v %v", ok, err)
	}
}

// A message on the channel wakes one waiter, the longest-waiting one, or
// the one whose ticket it names; the channel's last waiter leaving
// unsubscribes it.
func TestMessageWakesOne(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	w := wake.New[none, none](rdb, false, nil)
	defer w.Close()
	a := w.Add("ch", "ta", none{}, false)
	if a.Joined() {
		t.Fatal("the first waiter found the subscription confirmed")
	}
	b := w.Add("ch", "tb", none{}, false)
	confirmed(t, a)
	if n, ready := w.Waiting("ch"); n != 2 || !ready {
		t.Fatalf("Waiting: %d ready %v, want 2 ready", n, ready)
	}
	if c := w.Add("ch", "", none{}, false); !c.Joined() {
		t.Fatal("a waiter after the confirmation is not Joined")
	} else {
		c.Stop()
	}
	ctx := context.Background()
	if err := rdb.Publish(ctx, "ch", "tb").Err(); err != nil {
		t.Fatal(err)
	}
	await(t, "b woken by the message naming its ticket", b.Wake())
	if woken(a) {
		t.Fatal("a message naming b's ticket woke a too")
	}
	if err := rdb.Publish(ctx, "ch", "").Err(); err != nil {
		t.Fatal(err)
	}
	await(t, "a woken by a message naming no ticket", a.Wake())
	if woken(b) {
		t.Fatal("one message woke two waiters")
	}
	a.Stop()
	b.Stop()
	srv.WaitSubscribed(t, "ch", 0) // the last waiter's leaving unsubscribed it
}

// Confirmed waits for the confirmation (the server never gives it here),
// a wake-up, ctx, or its timeout, which passes on the Waker's clock.
func TestConfirmedTimesOut(t *testing.T) {
	t.Parallel()
	hole := redistest.StartBlackhole(t)
	rdb := redis.NewClient(&redis.Options{Addr: hole.Addr()})
	defer rdb.Close()
	// The reader pings the silent connection after HealthInterval and
	// replaces it after as long again, waking the waiters: a test stalled
	// that long sees a wake-up, not the timeout it is about.
	resets := make(chan error, 8)
	w := wake.New[none, none](rdb, false, func(err error) { resets <- err })
	clock := leasetest.NewFakeClock(time.Time{})
	wake.SetClock(w, clock)
	defer func() {
		hole.Close() // else Close waits for calls blocked on the blackhole
		w.Close()
	}()
	s := w.Add("ch", "", none{}, false)
	defer s.Stop()

	got := make(chan bool)
	go func() {
		ok, _ := s.Confirmed(context.Background(), 3*time.Second)
		got <- ok
	}()
	clock.AwaitTimers(t, 1, time.Minute)
	clock.Advance(3*time.Second - time.Nanosecond)
	select {
	case ok := <-got:
		t.Fatalf("Confirmed returned %v before its timeout", ok)
	default:
	}
	clock.Advance(time.Nanosecond)
	if ok := <-got; ok {
		select {
		case err := <-resets:
			t.Skipf("the connection was replaced meanwhile (%v): the test stalled past HealthInterval", err)
		default:
		}
		t.Fatal("Confirmed reported a confirmation the server never sent")
	}

	w.Notify("ch", "") // a wake-up ends the wait at once
	if ok, err := s.Confirmed(context.Background(), time.Hour); !ok || err != nil {
		t.Fatalf("Confirmed after a wake-up: %v %v, want true", ok, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, err := s.Confirmed(ctx, time.Hour); ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("Confirmed on an ended ctx: %v %v, want false, context.Canceled", ok, err)
	}
}

// A connection that fails is replaced: onReset is told why, every waiter
// is woken and learns (once) that it was subscribed again, and after a
// pause, on the Waker's clock, the new connection is confirmed and
// carries messages.
func TestResetSubscribesAgain(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	resets := make(chan error, 4)
	w := wake.New[none, none](rdb, false, func(err error) { resets <- err })
	clock := leasetest.NewFakeClock(time.Time{})
	wake.SetClock(w, clock)
	defer w.Close()
	a := w.Add("ch", "", none{}, false)
	b := w.Add("ch", "", none{}, false)
	confirmed(t, a)
	if a.Resubscribed() {
		t.Fatal("Resubscribed before any reconnect")
	}

	if _, err := srv.Do("CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-resets:
		if err == nil {
			t.Fatal("onReset told no cause")
		}
	case <-time.After(time.Minute):
		t.Fatal("the killed connection was not replaced within a minute")
	}
	for name, s := range map[string]*wake.Sub[none, none]{"a": a, "b": b} {
		await(t, "waiter "+name+" woken by the reconnect", s.Wake())
		if !s.Resubscribed() || s.Resubscribed() {
			t.Fatalf("waiter %s: Resubscribed not true exactly once after the reconnect", name)
		}
	}
	// The reader pauses before it reads the new connection: until the
	// clock moves, the confirmation is not seen.
	clock.AwaitTimers(t, 1, time.Minute)
	if _, ready := w.Waiting("ch"); ready {
		t.Fatal("the new subscription was confirmed during the reader's pause")
	}
	clock.Advance(time.Second)
	confirmed(t, a)
	if err := rdb.Publish(context.Background(), "ch", "").Err(); err != nil {
		t.Fatal(err)
	}
	await(t, "a woken by a message on the new connection", a.Wake())
	a.Stop()
	b.Stop()
}
