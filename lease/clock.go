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

// realClock is the real time, the Clock of a Refresher without one.
type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// now is the time on the clock of l's ValidUntil: l's Now, if it has one
// (a Lock on a clock of its own, see Keeper), else the real time.
func now(l Lock) time.Time {
	if c, ok := l.(interface{ Now() time.Time }); ok {
		return c.Now()
	}
	return time.Now()
}
