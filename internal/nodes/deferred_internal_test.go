package nodes

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/script"
)

// A batched Op's Scripter takes script's fast path, which reads no reply
// the caller stopped waiting for.
var _ script.Deferred = (*deferredCall)(nil)

type waiterKey struct{}

// A waiter is done when its timeout passes or its parent ends, whichever
// comes first, with that cause; its values are its parent's; once a use
// is over (its callback has run, or was stopped) it serves the next use
// as new, with a fresh channel only where the last one was closed.
func TestWaiter(t *testing.T) {
	t.Parallel()
	var w waiter
	bg := context.WithValue(context.Background(), waiterKey{}, "v")

	w.arm(bg, time.Nanosecond) // a timeout that passes at once
	<-w.Done()
	require.ErrorIs(t, w.Err(), context.DeadlineExceeded, "after its timeout, want context.DeadlineExceeded")
	if v := w.Value(waiterKey{}); v != "v" {
		t.Fatalf("Value = %v, want the parent's", v)
	}
	require.True(t, w.disarm(), "not reusable after its timer ran")

	parent, cancel := context.WithCancel(bg)
	w.arm(parent, time.Hour)
	require.False(t, w.Err() != nil, "done before its parent ended or its timeout passed")
	cancel()
	<-w.Done()
	require.ErrorIs(t, w.Err(), context.Canceled, "after its parent ended, want context.Canceled")
	require.True(t, w.disarm(), "not reusable after its parent's callback ran")

	for range 3 { // neither comes: the same channel, open, every time
		parent, cancel := context.WithCancel(bg)
		w.arm(parent, time.Hour)
		ch := w.Done()
		require.True(t, w.disarm(), "not reusable after a use that ended first")
		cancel()
		select {
		case <-ch:
			t.Fatal("closed after a use that ended first")
		default:
		}
		w.arm(bg, 0) // no timeout, a parent that cannot end
		require.False(t, w.Done() != ch, "a new channel for a use after one that was never closed")
		if w.disarm(); w.Err() != nil {
			t.Fatal("done without a cause")
		}
	}
}
