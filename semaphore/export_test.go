package semaphore

import "testing"

// EvQueued is the test hook's event: an Acquire attempt queued.
const EvQueued = evQueued

// SetTestHook makes the package call f at each event until t ends.
func SetTestHook(t testing.TB, f func(event, token string)) {
	testHook.Store(&f)
	t.Cleanup(func() { testHook.Store(nil) })
}

// Keys returns the Redis keys of s, for tests that look at them.
func Keys(s *Semaphore) []string { return s.keys }
