package backend_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
)

// A ReleaseWatch reports a Release to the Keeps under way once, with
// lease.ErrReleased, and to a Keep that starts after it at once (renewing
// nothing); the Keep's own reports after that, or anything after its stop,
// are dropped.
func TestReleaseWatch(t *testing.T) {
	t.Parallel()
	var w backend.ReleaseWatch
	var causes []error
	var inner func(error)
	stops := 0
	stop := w.Keep(func(cause error) { causes = append(causes, cause) }, func(lost func(error)) func() {
		inner = lost
		return func() { stops++ }
	})
	w.Released()
	require.Len(t, causes, 1)
	assert.ErrorIs(t, causes[0], lease.ErrReleased)
	inner(lease.ErrNotHeld) // the renewal after the Release finds it gone
	assert.Len(t, causes, 1, "reported twice")
	stop()
	assert.Equal(t, 1, stops)

	started := false
	w.Keep(func(cause error) { causes = append(causes, cause) }, func(func(error)) func() {
		started = true
		return func() {}
	})()
	assert.False(t, started, "a Keep of a released Lock renewed")
	require.Len(t, causes, 2)
	assert.ErrorIs(t, causes[1], lease.ErrReleased)

	var other backend.ReleaseWatch
	n := 0
	other.Keep(func(error) { n++ }, func(func(error)) func() { return func() {} })()
	other.Released()
	assert.Zero(t, n, "reported after stop")
}
