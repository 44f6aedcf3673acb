package lease

import "time"

// Clock is a time source: the real one (nil, where a Clock is optional) or
// a fake one in tests (leasetest.FakeClock).
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer of a Clock, as *time.Timer is of the real one.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}
