package sim

import (
	"reflect"
	"testing"
	"time"
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
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: two schedules:\n%v\n%v", seed, a, b)
		}
		if reflect.DeepEqual(a, Schedule(seed+1, cfg)) {
			t.Fatalf("seeds %d and %d: one schedule", seed, seed+1)
		}
		for i := 1; i < len(a); i++ {
			if a[i].At < a[i-1].At {
				t.Fatalf("seed %d: not in time order: %v", seed, a)
			}
		}
		if x, y := NewRand(seed, 1, 2).Uint64(), NewRand(seed, 1, 2).Uint64(); x != y {
			t.Fatalf("seed %d: one stream drew %d and %d", seed, x, y)
		}
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
	if a.Digest() != b.Digest() {
		t.Fatalf("digests differ:\n%s\n%s", a.Digest(), b.Digest())
	}
	if c := mk(t0, 8); c.Digest() == a.Digest() {
		t.Fatalf("another fence, one digest: %s", a.Digest())
	}
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
		if !h.Broke(c.inv) {
			t.Errorf("%s: not found in\n%s", c.inv, h)
		}
	}
	// And none fires on a history that keeps them all.
	h := NewHistory(t0)
	g := &Grant{Client: 0, Key: "k", Fence: 1, Called: ms(0), Returned: ms(1), ValidUntil: ms(10)}
	h.Granted(g)
	h.Probe(ms(5), func(*Grant) bool { return true }, nil)
	h.Ended(g, "release")
	h.Granted(&Grant{Client: 1, Key: "k", Fence: 2, Called: ms(2), Returned: ms(20), ValidUntil: ms(30)})
	h.Final()
	if vs := h.Violations(); len(vs) > 0 {
		t.Errorf("violations in a good history: %v", vs)
	}
}
