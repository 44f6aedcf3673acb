package redistest

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually looks again.
const pollEvery = 5 * time.Millisecond

// Eventually polls cond until it holds, failing tb after d: for a state of
// a server or another process that no event announces (a subscription
// count, a key, a report the command prints). A test waits for an event
// of its own code on a channel, a hook or an observer instead.
func Eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not reached within %v: %s", d, what)
		}
		time.Sleep(pollEvery)
	}
}

// WaitSubscribed waits, at most 10 s, until the server has n subscribers
// on channel (PUBSUB NUMSUB).
func (s *Server) WaitSubscribed(tb testing.TB, channel string, n int) {
	tb.Helper()
	Eventually(tb, 10*time.Second, "a subscriber count of "+channel, func() bool {
		r, err := s.Do("PUBSUB", "NUMSUB", channel)
		if err != nil {
			tb.Fatal(err)
		}
		l, ok := r.([]any)
		return ok && len(l) == 2 && l[1] == int64(n)
	})
}
