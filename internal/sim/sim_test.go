package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testConfig() Config {
	return Config{Nodes: 3, Clients: 3, Keys: 1, Duration: time.Second,
		MinTTL: 100 * time.Millisecond, MaxTTL: 400 * time.Millisecond, Faults: 6, Amnesia: true, Step: true}
}

// What a seed draws replays: the same seed gives the same schedule and
// the same random streams; another seed another schedule.
func TestScheduleReplays(t *testing.T) {
	cfg := testConfig()
	for seed := int64(1); seed <= 50; seed++ {
		a, b := Schedule(seed, cfg), Schedule(seed, cfg)
		require.Equal(t, a, b, "seed %d: two schedules", seed)
		require.NotEqual(t, a, Schedule(seed+1, cfg), "seeds %d and %d: one schedule", seed, seed+1)
		for i := 1; i < len(a); i++ {
			require.GreaterOrEqual(t, a[i].At, a[i-1].At, "seed %d: not in time order: %v", seed, a)
		}
		require.Equal(t, NewRand(seed, 1, 2).Uint64(), NewRand(seed, 1, 2).Uint64(), "seed %d: one stream drew two values", seed)
	}
}

// A history's digest is the same for two runs alike that start at
// different times (fences from clocks read relative to the start), and
// differs when a grant does.
func TestDigest(t *testing.T) {
	mk := func(start time.Time, fence int64) *History {
		h := NewHistory(start)
		at := start.Add(5 * time.Millisecond)
		h.Granted(&Grant{Client: 1, Key: "k", Fence: start.UnixMicro() + fence, Called: start, Returned: at, ValidUntil: at.Add(time.Second)})
		return h
	}
	t0 := time.Unix(1000, 0)
	a, b := mk(t0, 7), mk(t0.Add(time.Hour), 7)
	require.Equal(t, a.Digest(), b.Digest(), "two runs alike, two digests")
	require.NotEqual(t, a.Digest(), mk(t0, 8).Digest(), "another fence, one digest")
}

// Each check fires on the history it guards against.
func TestChecksFire(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	cases := []struct {
		inv string
		run func(h *History)
	}{
		{InvValidReturn, func(h *History) {
			h.Granted(&Grant{Client: 0, Key: "k", Fence: 1, Called: ms(0), Returned: ms(10), ValidUntil: ms(9)})
		}},
		{InvExclusion, func(h *History) {
			h.Granted(&Grant{Client: 0, Key: "k", Fence: 1, Called: ms(0), Returned: ms(1), ValidUntil: ms(100)})
			h.Granted(&Grant{Client: 1, Key: "k", Fence: 2, Called: ms(2), Returned: ms(3), ValidUntil: ms(100)})
		}},
		{InvFenceOrder, func(h *History) {
			h.Granted(&Grant{Client: 0, Key: "k", Fence: 5, Called: ms(0), Returned: ms(1), ValidUntil: ms(2)})
			h.Granted(&Grant{Client: 1, Key: "k", Fence: 4, Called: ms(3), Returned: ms(4), ValidUntil: ms(9)})
		}},
		{InvLossReported, func(h *History) {
			h.Granted(&Grant{Client: 0, Key: "k", Fence: 1, Called: ms(0), Returned: ms(1), ValidUntil: ms(100)})
			h.Probe(ms(50), func(*Grant) bool { return false }, nil)
		}},
		{InvExpiry, func(h *History) { h.Probe(ms(1), nil, []string{"node 0 key \"k\""}) }},
	}
	for _, c := range cases {
		h := NewHistory(t0)
		c.run(h)
		h.Final()
		assert.True(t, h.Broke(c.inv), "%s: not found in\n%s", c.inv, h)
	}
	// And none fires on a history that keeps them all.
	h := NewHistory(t0)
	g := &Grant{Client: 0, Key: "k", Fence: 1, Called: ms(0), Returned: ms(1), ValidUntil: ms(10)}
	h.Granted(g)
	h.Probe(ms(5), func(*Grant) bool { return true }, nil)
	h.Ended(g, "release")
	h.Granted(&Grant{Client: 1, Key: "k", Fence: 2, Called: ms(2), Returned: ms(20), ValidUntil: ms(30)})
	h.Final()
	assert.Empty(t, h.Violations(), "violations in a good history")
}
