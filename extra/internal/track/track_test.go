package track

import (
	"context"
	"testing"
	"time"
)

func TestGrants(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	var expired []string
	g := NewGrants(func() time.Time { return now }, func(k string) { expired = append(expired, k) })
	g.Obtained("a", 1, time.Second)
	g.Obtained("b", 2, time.Second)
	g.Obtained("multi", 0, time.Second) // not tracked
	if n := g.Sweep(nil); n != 2 {
		t.Fatalf("held %d, want 2", n)
	}
	g.Released("a", 1)
	g.Refreshed("b", 2, 3*time.Second)
	now = now.Add(2 * time.Second)
	if n := g.Sweep(nil); n != 1 || len(expired) != 0 {
		t.Fatalf("after a release and a refresh: held %d, expired %v", n, expired)
	}
	now = now.Add(2 * time.Second)
	if n := g.Sweep(nil); n != 0 || len(expired) != 1 {
		t.Fatalf("past the refreshed lease: held %d, expired %v", n, expired)
	}
	if !g.Gone("b", 2) || len(expired) != 1 {
		t.Fatalf("a late Release after the sweep: stale owner, counted once (%v)", expired)
	}

	// A loss, then the Release after it: one expiration, no stale owner.
	g.Obtained("c", 3, time.Second)
	g.Lost("c", 3)
	g.Lost("c", 3)
	if g.Gone("c", 3) || len(expired) != 2 || g.Sweep(nil) != 0 {
		t.Fatalf("loss then release: expired %v", expired)
	}
}

func TestCall(t *testing.T) {
	t.Parallel()
	k1, k2 := NewKey(), NewKey()
	ctx := k2.Begin(k1.Begin(context.Background()))
	c1, c2 := k1.From(ctx), k2.From(ctx)
	if c1 == nil || c2 == nil || c1 == c2 {
		t.Fatal("each key finds its own call")
	}
	if !c1.Waited() || c1.Waited() || c1.WaitStart().IsZero() || !c2.WaitStart().IsZero() {
		t.Fatal("Waited records the first wait of its call only")
	}
	if NewKey().From(ctx) != nil {
		t.Fatal("a third key finds nothing")
	}
}

// The latency buckets resolve the calls to a Redis nearby: the lowest is at
// most 25 µs, and 50 µs to 0.5 ms (a local Obtain takes about 0.1 ms) spans
// several buckets, so that a histogram of them does not sit in one.
func TestLatencyBucketsResolveLocalRedis(t *testing.T) {
	t.Parallel()
	if !Increasing(LatencyBuckets) {
		t.Fatalf("latency buckets %v are not increasing", LatencyBuckets)
	}
	if LatencyBuckets[0] > 25e-6 {
		t.Errorf("lowest latency bucket %v s, want at most 25 µs", LatencyBuckets[0])
	}
	local := 0
	for _, b := range LatencyBuckets {
		if b >= 50e-6 && b <= 500e-6 {
			local++
		}
	}
	if local < 4 {
		t.Errorf("%d latency buckets between 50 µs and 0.5 ms, want at least 4: %v", local, LatencyBuckets)
	}
}
