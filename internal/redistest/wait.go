package redistest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pollEvery is how often a poll of a server's state looks again.
const pollEvery = 5 * time.Millisecond

// Eventually polls cond until it holds, failing tb after d: for a state of
// a server or another process that no event announces (a subscription
// count, a key, a report the command prints). Unlike require.Eventually,
// it calls cond on the caller's goroutine, so cond may fail tb itself.
//
// To be removed: new and converted tests use require.Eventually (with a
// cond that does not fail the test); Eventually goes once the tests that
// still call it (the root package's, chaos, cmd/redislock,
// extra/redislockprom) have moved. (Not marked Deprecated: staticcheck
// would fail their modules meanwhile.)
func Eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not reached within %v: %s", d, what)
		}
		// A poll of another process's state, which no event announces.
		time.Sleep(pollEvery)
	}
}

// WaitSubscribed waits, at most 10 s, until the server has n subscribers
// on channel (PUBSUB NUMSUB).
func (s *Server) WaitSubscribed(tb testing.TB, channel string, n int) {
	tb.Helper()
	var last said
	require.Eventually(tb, func() bool {
		r, err := s.Do("PUBSUB", "NUMSUB", channel)
		if err != nil {
			last.Store(err)
			return false
		}
		last.Store(r)
		l, ok := r.([]any)
		return ok && len(l) == 2 && l[1] == int64(n)
	}, 10*time.Second, pollEvery, "a subscriber count of %d on %s (PUBSUB NUMSUB said %v)", n, channel, &last)
}

// said is what a server said last, for a failure message (a poll sets it
// on testify's goroutine).
type said struct{ v atomic.Value }

func (s *said) Store(v any) { s.v.Store(fmt.Sprint(v)) }

func (s *said) String() string {
	if v, ok := s.v.Load().(string); ok {
		return v
	}
	return "nothing"
}
