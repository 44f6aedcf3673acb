package redislock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// A node whose obtain timed out may hold the grant all the same (the
// request arrived, the reply came too late); the client releases it there
// in the background. Until that release lands, the node holds the grant:
// a Refresh must not count it towards its majority, or the majority
// vanishes when the release arrives while the holder believes the lock
// valid, and a second client is granted the lock within that validity
// (the simulation found it: seed 6098 of TestSim/safe).
//
// Here node 2's obtain runs but answers only after its node timeout, and
// its release is held back on the way; node 1 stops answering; the holder
// refreshes (nodes 0 and 2 hold the grant, node 1 does not answer); then
// the release reaches node 2. Once node 1's copy of the first grant
// expires, nodes 1 and 2 grant the lock to a second client: that must not
// happen before the first holder's validity has ended.
func TestQuorumRefreshIgnoresReleasedNode(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	const key, ttl = "orphan", 3 * time.Second
	proxy := redistest.StartProxy(t, q.srvs[1].Addr())
	hook := &lateNodeHook{key: redislock.LockKey(key), held: make(chan struct{}),
		let: make(chan struct{}), landed: make(chan struct{})}
	var rdbs []redis.UniversalClient
	for i, s := range q.srvs {
		rdb := s.Client(func(o *redis.Options) {
			o.MaxRetries = -1
			o.ContextTimeoutEnabled = true // the node timeout is the calls' deadline
			if i == 1 {
				o.Addr = proxy.Addr()
			}
		})
		if i == 2 {
			rdb.AddHook(hook)
		}
		rdbs = append(rdbs, rdb)
	}
	c, err := redislock.NewQuorum(rdbs, redislock.WithNodeTimeout(time.Second), redislock.WithReleaseTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t, 30*time.Second)
	// Connections up and the scripts loaded, on another key.
	warm, err := c.Obtain(ctx, "warm", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Refresh(ctx, ttl); err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}

	l, err := c.Obtain(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer close(hook.let) // whatever happens, the held release may go
	// Node 2 granted, its reply timed out, and its release is on its way.
	awaitClosed(t, ctx, hook.held, "node 2's release")
	if n := q.holders(t, key, l.Token()); n != 3 {
		t.Fatalf("the grant is on %d nodes, want 3 (node 2's obtain ran)", n)
	}
	proxy.Cut(redistest.Both)
	err = l.Refresh(ctx, ttl) // node 0 extends; node 1 does not answer; node 2 was released
	t.Logf("Refresh with node 1 silent and node 2 released: %v", err)
	until := l.ValidUntil()
	hook.let <- struct{}{}
	// Node 2 no longer holds the grant.
	awaitClosed(t, ctx, hook.landed, "node 2's release to land")

	c2, err := redislock.NewQuorum(q.rdbs, slackNodeTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	l2, err := c2.Obtain(ctx, key, ttl, redislock.WithRetry(redislock.LinearBackoff(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Now(); got.Before(until) {
		t.Fatalf("a second client was granted fence %d %v before the first holder's validity ended", l2.Fence(), until.Sub(got))
	}
}

// awaitClosed returns once ch is closed, failing the test if ctx ends first.
func awaitClosed(t *testing.T, ctx context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
	}
}

// lateNodeHook is node 2's network: the first obtain of key runs on the
// node, but its reply reaches the caller only after the call's deadline;
// the first release of key after it is held back (held is closed) until
// let receives, and landed is closed once it ran. Other calls pass.
type lateNodeHook struct {
	key                string
	held, let, landed  chan struct{}
	mu                 sync.Mutex
	obtained, released bool
}

func (*lateNodeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lateNodeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if len(a) < 4 || fmt.Sprint(a[2]) != "1" || a[3] != h.key {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		first, release := !h.obtained, h.obtained && !h.released
		h.obtained, h.released = true, h.released || release
		h.mu.Unlock()
		switch {
		case first: // the obtain: it runs, its reply is late
			if err := next(context.WithoutCancel(ctx), cmd); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		case release:
			close(h.held)
			<-h.let
			defer close(h.landed)
			return next(context.WithoutCancel(ctx), cmd)
		}
		return next(ctx, cmd)
	}
}

func (*lateNodeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
