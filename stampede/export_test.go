package stampede

// The test hook's events.
const (
	EvJoin   = evJoin
	EvWait   = evWait
	EvFill   = evFill
	EvStored = evStored
)

// WithTestHook makes the Group call f at each event.
func WithTestHook(f func(event, key string)) Option { return func(o *options) { o.hook = f } }
