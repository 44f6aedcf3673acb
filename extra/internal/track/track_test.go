package track

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.True(t, g.Gone("b", 2), "a late Release after the sweep: stale owner, counted once (%v)", expired)
	require.Len(t, expired, 1, "a late Release after the sweep: stale owner, counted once (%v)", expired)

	// A loss, then the Release after it: one expiration, no stale owner.
	g.Obtained("c", 3, time.Second)
	g.Lost("c", 3)
	g.Lost("c", 3)
	require.False(t, g.Gone("c", 3), "loss then release: expired %v", expired)
	require.Len(t, expired, 2, "loss then release: expired %v", expired)
	require.Equal(t, 0, g.Sweep(nil), "loss then release: expired %v", expired)
}

func TestCall(t *testing.T) {
	t.Parallel()
	k1, k2 := NewKey(), NewKey()
	ctx := k2.Begin(k1.Begin(context.Background()))
	c1, c2 := k1.From(ctx), k2.From(ctx)
	if c1 == nil || c2 == nil || c1 == c2 {
		t.Fatal("each key finds its own call")
	}
	require.True(t, c1.Waited(), "Waited records the first wait of its call only")
	require.False(t, c1.Waited(), "Waited records the first wait of its call only")
	require.False(t, c1.WaitStart().IsZero(), "Waited records the first wait of its call only")
	require.True(t, c2.WaitStart().IsZero(), "Waited records the first wait of its call only")
	require.False(t, NewKey().From(ctx) != nil, "a third key finds nothing")
}

// The latency buckets resolve the calls to a Redis nearby: the lowest is at
// most 25 µs, and 50 µs to 0.5 ms (a local Obtain takes about 0.1 ms) spans
// several buckets, so that a histogram of them does not sit in one.
func TestLatencyBucketsResolveLocalRedis(t *testing.T) {
	t.Parallel()
	require.True(t, Increasing(LatencyBuckets), "latency buckets %v are not increasing", LatencyBuckets)
	if LatencyBuckets[0] > 25e-6 {
		t.Errorf("lowest latency bucket %v s, want at most 25 µs", LatencyBuckets[0])
	}
	local := 0
	for _, b := range LatencyBuckets {
		if b >= 50e-6 && b <= 500e-6 {
			local++
		}
	}
	assert.GreaterOrEqual(t, local, 4, "%d latency buckets between 50 µs and 0.5 ms, want at least 4: %v", local, LatencyBuckets)
}
