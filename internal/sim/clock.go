package sim

import (
	"sync"
	"time"
)

// Clock is a node's (or a client's) wall clock as a function of the true
// time (the bubble's clock): it runs at Rate (1 + drift) from an offset,
// and steps when told.
type Clock struct {
	mu     sync.Mutex
	base   time.Time     // true time of the last re-basing
	at     time.Time     // this clock's reading then
	rate   float64       // its speed against true time
	offset time.Duration // total of the steps, for the history
}

// NewClock returns a clock that reads the true time now + offset and runs
// at 1 + drift.
func NewClock(now time.Time, offset time.Duration, drift float64) *Clock {
	return &Clock{base: now, at: now.Add(offset), rate: 1 + drift, offset: offset}
}

// Read returns the clock's reading at true time now.
func (c *Clock) Read(now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read(now)
}

func (c *Clock) read(now time.Time) time.Time {
	return c.at.Add(time.Duration(float64(now.Sub(c.base)) * c.rate))
}

// Step moves the clock by d at true time now.
func (c *Clock) Step(now time.Time, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.base = c.read(now).Add(d), now
	c.offset += d
}

// Rate is the clock's speed against true time.
func (c *Clock) Rate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rate
}
