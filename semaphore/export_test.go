package semaphore

// EvQueued is the test hook's event: an Acquire attempt queued.
const EvQueued = evQueued

// WithTestHook makes the Semaphore call f at each event.
func WithTestHook(f func(event, token string)) Option { return func(o *options) { o.hook = f } }

// Keys returns the Redis keys of s, for tests that look at them.
func Keys(s *Semaphore) []string { return s.keys }
