package stampede

import "testing"

// The test hook's events.
const (
	EvJoin   = evJoin
	EvWait   = evWait
	EvFill   = evFill
	EvStored = evStored
)

// SetTestHook makes the package call f at each event until t ends.
func SetTestHook(t testing.TB, f func(event, key string)) {
	testHook.Store(&f)
	t.Cleanup(func() { testHook.Store(nil) })
}
