package track

import (
	"context"
	"testing"
	"time"
)

func TestGrants(t *testing.T) {
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
