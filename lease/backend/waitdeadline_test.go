package backend

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// elapse moves d's times back by e, as if e had passed since its last Next.
func (d *WaitDeadline) elapse(e time.Duration) { d.at, d.next = d.at.Add(-e), d.next.Add(-e) }

// Past the wait limit, a lease seen about to end is waited for; the wait
// ends at the first attempt made after its end that finds the lock held,
// not at the late reply of an attempt made before.
func TestWaitDeadlineLeaseEnd(t *testing.T) {
	t.Parallel()
	const margin = 10 * time.Millisecond
	held := lease.ErrNotObtained
	for _, tc := range []struct {
		name    string
		backoff time.Duration // the attempt after the limit: made this long after
		seen    time.Duration // the next attempt finds the lock held this long more
		giveUp  bool
	}{
		{"made after the end", time.Second, 900 * time.Millisecond, true},
		{"made before the end, replied after", 20 * time.Millisecond, 10 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := NewWaitDeadline(context.Background(), 0, time.Second, margin) // the limit has passed
			w, err := d.Next(tc.backoff, true, held, 30*time.Millisecond)
			if err != nil || w != min(tc.backoff, 30*time.Millisecond+margin) {
				t.Fatalf("Next, the lease ending in 30 ms = %v, %v; want to wait for its end", w, err)
			}
			d.elapse(50 * time.Millisecond) // the end has passed when the reply comes
			w, err = d.Next(tc.backoff, true, held, tc.seen)
			var wl *lease.WaitLimitError
			switch {
			case tc.giveUp && !errors.As(err, &wl):
				t.Fatalf("Next after the lease's end = %v, %v; want a *WaitLimitError", w, err)
			case !tc.giveUp && (err != nil || w != 0):
				t.Fatalf("Next on a late reply = %v, %v; want another attempt at once", w, err)
			case !tc.giveUp:
				// That attempt, made after the end, decides.
				if _, err := d.Next(tc.backoff, true, held, 900*time.Millisecond); !errors.As(err, &wl) {
					t.Fatalf("Next on the attempt after = %v; want a *WaitLimitError", err)
				}
			}
		})
	}
}
