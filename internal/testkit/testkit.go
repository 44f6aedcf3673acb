// Package testkit holds the helpers that the tests of every package and
// module of the repository share, each defined once, in testify's style:
// a context bounded by the test, receiving from a channel with a failure
// bound, skipping long tests under -short. Assertions are testify's own
// (require.ErrorIs, require.Eventually); this package adds only what
// testify lacks.
//
// Only tests and test-support packages import it (it imports testing and
// testify).
package testkit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Bound is the failure bound of every wait here: long enough for a -race
// binary on a loaded machine, short enough that a hung test fails with a
// message rather than at go test's -timeout. A wait that succeeds never
// waits for it.
const Bound = time.Minute

// deadlineMargin is how long before the test binary's deadline (-timeout)
// a bounded wait gives up, so that the test fails with its own message
// instead of the binary panicking.
const deadlineMargin = 5 * time.Second

// bound is how long a wait of t may take: Bound, or less when the test
// binary's deadline comes sooner.
func bound(t testing.TB) time.Duration {
	d := Bound
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := dt.Deadline(); ok {
			d = min(d, max(time.Until(end)-deadlineMargin, time.Second))
		}
	}
	return d
}

// Context returns a context for one test: cancelled when t ends, and
// ending after Bound (or shortly before the test binary's deadline).
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), bound(t))
	t.Cleanup(cancel)
	return ctx
}

// Recv returns the next value received from ch (the zero value once ch is
// closed), failing t if none comes within Bound. msgAndArgs say what was
// awaited, as in testify.
func Recv[T any](t testing.TB, ch <-chan T, msgAndArgs ...any) T {
	t.Helper()
	d := bound(t)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		require.Fail(t, fmt.Sprintf("nothing received within %v", d), msgAndArgs...)
	}
	var zero T
	return zero
}

// NoRecv fails t if a value is ready on ch (or ch is closed) now. It does
// not wait: call it when whatever could send has run (after a fake
// clock's Advance, which waits for the timers it fires; after
// synctest.Wait in a bubble).
func NoRecv[T any](t testing.TB, ch <-chan T, msgAndArgs ...any) {
	t.Helper()
	select {
	case v, ok := <-ch:
		if ok {
			require.Fail(t, fmt.Sprintf("received %+v, want nothing", v), msgAndArgs...)
		}
		require.Fail(t, "channel closed, want nothing", msgAndArgs...)
	default:
	}
}

// SkipShort skips t under -short: a test that runs for seconds (a Redis
// Cluster or Sentinel deployment of its own, a soak).
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("a topology or soak test: skipped under -short")
	}
}
