package wake_test

import (
	"context"
	"testing"
	"time"

	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/wake"
)

type none = struct{}

func woken(s *wake.Sub[none, none]) bool {
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
	if ok, err := a.Confirmed(context.Background(), time.Minute); !ok || err != nil {
		t.Fatalf("subscription not confirmed: %v", err)
	}
	if err := rdb.Publish(context.Background(), "ch", "c x a").Err(); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*wake.Sub[none, none]{"a": a, "c": c} {
		select {
		case <-s.Wake():
		case <-time.After(time.Minute):
			t.Fatalf("waiter %s, named, was not woken", name)
		}
	}
	w.Notify("ch", "a")
	a.Stop() // woken, leaving without trying
	w.Notify("ch", "")
	w.Notify("ch", "other")
	if woken(b) {
		t.Fatal("a waiter the message did not name was woken")
	}
	w.Notify("ch", "b")
	if !woken(b) {
		t.Fatal("the waiter named was not woken")
	}
	b.Stop()
	c.Stop()
}
