package redislock_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
)

// Fences keep increasing when a node restarts empty between grants.
func TestQuorumFencesAfterRestart(t *testing.T) {
	q := startQuorum(t, 5)
	ctx := ctxT(t, 30*time.Second)
	var last int64
	for round := range 5 {
		// A fresh client each round: no fence memory on the client side.
		c, err := redislock.NewQuorum(q.rdbs, slackNodeTimeout)
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Obtain(ctx, "r", time.Second, redislock.WithRetry(redislock.LinearBackoff(20*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		if l.Fence() <= last {
			t.Fatalf("round %d: fence %d after %d", round, l.Fence(), last)
		}
		last = l.Fence()
		_ = l.Release(ctx)
		_ = c.Close()
		q.srvs[round].Restart() // one node comes back empty
	}
}

// Fences stay ordered when proposals race on nodes with higher counters.
func TestQuorumFenceReproposal(t *testing.T) {
	q := startQuorum(t, 3)
	ctx := ctxT(t, 10*time.Second)
	future := time.Now().Add(time.Hour).UnixMicro()
	for _, rdb := range q.rdbs[:2] { // two nodes have seen a fence from a fast clock
		rdb.Set(ctx, redislock.DefaultPrefix+"{p}", fmt.Sprintf("~:%d:", future), time.Hour) // a released record
	}
	c := q.client(t)
	l, err := c.Obtain(ctx, "p", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() <= future {
		t.Fatalf("fence %d not above the majority's counter %d", l.Fence(), future)
	}
	_ = l.Release(ctx)
}

// Validity is positive, below TTL - elapsed, and leaves room for drift.
func TestQuorumValidity(t *testing.T) {
	q := startQuorum(t, 5)
	c := q.client(t)
	ctx := ctxT(t, 10*time.Second)
	var vs []time.Duration
	for range 20 {
		start := time.Now()
		l, err := c.Obtain(ctx, "v", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		end := time.Now()
		v := l.ValidUntil().Sub(start)
		if v <= 0 || l.ValidUntil().After(end.Add(time.Second-12*time.Millisecond)) {
			t.Fatalf("validity %v (request took %v)", v, end.Sub(start))
		}
		vs = append(vs, v)
		// Every node that holds it has at least the validity left.
		for i, rdb := range q.rdbs {
			if pttl := rdb.PTTL(ctx, redislock.DefaultPrefix+"{v}").Val(); pttl > 0 && pttl < time.Until(l.ValidUntil()) {
				t.Fatalf("node %d PTTL %v below remaining validity %v", i, pttl, time.Until(l.ValidUntil()))
			}
		}
		_ = l.Release(ctx)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	t.Logf("validity min %v max %v", vs[0], vs[len(vs)-1])
}
