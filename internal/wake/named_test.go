package wake_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/internal/wake"
)

type none = struct{}

// woken reports whether s is woken now, consuming its wake-up.
func woken[R, G any](s *wake.Sub[R, G]) bool {
	select {
	case <-s.Wake():
		return true
	default:
		return false
	}
}

// A named Waker wakes the waiters a message names, every one of them and
// no other, over a real subscription; a woken waiter that leaves does not
// pass its wake-up on.
func TestNamedWakesOnlyNamed(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	w := wake.NewNamed[none, none](rdb, nil)
	defer w.Close()
	a := w.Add("ch", "a", none{}, false)
	b := w.Add("ch", "b", none{}, false)
	c := w.Add("ch", "c", none{}, false)
	confirmed(t, a)
	require.NoError(t, rdb.Publish(context.Background(), "ch", "c x a").Err())
	for name, s := range map[string]*wake.Sub[none, none]{"a": a, "c": c} {
		testkit.Recv(t, s.Wake(), "waiter %s, named, woken", name)
	}
	w.Notify("ch", "a")
	a.Stop() // woken, leaving without trying
	w.Notify("ch", "")
	w.Notify("ch", "other")
	require.False(t, woken(b), "a waiter the message did not name was woken")
	w.Notify("ch", "b")
	require.True(t, woken(b), "the waiter named was not woken")
	b.Stop()
	c.Stop()
}
