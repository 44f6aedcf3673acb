package wake

import "github.com/redislock-go/redislock/lease"

// SetClock makes w time Sub.Confirmed and its pauses before a reconnect on
// c (a leasetest.FakeClock); call it before the first Add.
func SetClock[R, G any](w *Waker[R, G], c lease.Clock) { w.clock = c }
