package wake_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/internal/wake"
	"github.com/redislock-go/redislock/lease/leasetest"
)

// The subscription connection, on real servers: confirmation, messages,
// the last waiter's unsubscribe, a replaced connection; the waits that
// time out (Confirmed, the pause before a reconnect) run on a fake clock.

// confirmed waits until s's subscription is confirmed.
func confirmed(t *testing.T, s *wake.Sub[none, none]) {
	t.Helper()
	ok, err := s.Confirmed(context.Background(), testkit.Bound)
	require.NoError(t, err)
	require.True(t, ok, "subscription not confirmed")
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
	require.False(t, a.Joined(), "the first waiter found the subscription confirmed")
	b := w.Add("ch", "tb", none{}, false)
	confirmed(t, a)
	n, ready := w.Waiting("ch")
	require.Equal(t, 2, n, "Waiting")
	require.True(t, ready, "Waiting: ready")
	c := w.Add("ch", "", none{}, false)
	require.True(t, c.Joined(), "a waiter after the confirmation is not Joined")
	c.Stop()
	ctx := context.Background()
	require.NoError(t, rdb.Publish(ctx, "ch", "tb").Err())
	testkit.Recv(t, b.Wake(), "b woken by the message naming its ticket")
	require.False(t, woken(a), "a message naming b's ticket woke a too")
	require.NoError(t, rdb.Publish(ctx, "ch", "").Err())
	testkit.Recv(t, a.Wake(), "a woken by a message naming no ticket")
	require.False(t, woken(b), "one message woke two waiters")
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
	clock.AwaitTimers(t, 1, testkit.Bound)
	clock.Advance(3*time.Second - time.Nanosecond)
	testkit.NoRecv(t, got, "Confirmed returned before its timeout")
	clock.Advance(time.Nanosecond)
	if ok := testkit.Recv(t, got, "Confirmed at its timeout"); ok {
		select {
		case err := <-resets:
			t.Skipf("the connection was replaced meanwhile (%v): the test stalled past HealthInterval", err)
		default:
		}
		require.Fail(t, "Confirmed reported a confirmation the server never sent")
	}

	w.Notify("ch", "") // a wake-up ends the wait at once
	ok, err := s.Confirmed(context.Background(), time.Hour)
	require.NoError(t, err, "Confirmed after a wake-up")
	require.True(t, ok, "Confirmed after a wake-up")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ok, err = s.Confirmed(ctx, time.Hour)
	require.ErrorIs(t, err, context.Canceled, "Confirmed on an ended ctx")
	require.False(t, ok, "Confirmed on an ended ctx")
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
	require.False(t, a.Resubscribed(), "Resubscribed before any reconnect")

	_, err := srv.Do("CLIENT", "KILL", "TYPE", "pubsub")
	require.NoError(t, err)
	require.Error(t, testkit.Recv(t, resets, "the killed connection replaced"), "onReset told no cause")
	for name, s := range map[string]*wake.Sub[none, none]{"a": a, "b": b} {
		testkit.Recv(t, s.Wake(), "waiter %s woken by the reconnect", name)
		require.True(t, s.Resubscribed(), "waiter %s: Resubscribed after the reconnect", name)
		require.False(t, s.Resubscribed(), "waiter %s: Resubscribed twice after the reconnect", name)
	}
	// The reader pauses before it reads the new connection: until the
	// clock moves, the confirmation is not seen.
	clock.AwaitTimers(t, 1, testkit.Bound)
	_, ready := w.Waiting("ch")
	require.False(t, ready, "the new subscription was confirmed during the reader's pause")
	clock.Advance(time.Second)
	confirmed(t, a)
	require.NoError(t, rdb.Publish(context.Background(), "ch", "").Err())
	testkit.Recv(t, a.Wake(), "a woken by a message on the new connection")
	a.Stop()
	b.Stop()
}
