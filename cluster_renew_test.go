package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redisproc"
	"github.com/redislock-go/redislock/lease"
)

// Locks held on every master are renewed by one renewer, the calls of one
// node (one batch_refresh.lua per slot) pipelined; a lock deleted behind
// its holder's back is reported to that holder alone.
func clusterKeptAcrossSlots(t *testing.T, rc realCluster) {
	ctx := ctxT(t, 30*time.Second)
	rdb := rc.Client(nil)
	calls := &batchCalls{}
	rdb.AddHook(calls)
	rec := newRenewLog()
	c := newClient(t, rdb, redislock.WithObserver(rec))
	const n = 60
	const ttl = 1500 * time.Millisecond
	var keys []string
	var held []*lease.Held
	for i := range n {
		key := fmt.Sprintf("%s-%d", t.Name(), i)
		l, err := c.Obtain(ctx, key, ttl)
		if err != nil {
			t.Fatal(err)
		}
		h, err := lease.Hold(ctx, l, ttl)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release(ctx)
		keys, held = append(keys, key), append(held, h)
	}
	eventually(t, 10*time.Second, "every lock renewed", func() bool { return rec.renewedAll(keys) })
	if p, k := calls.pipelines.Load(), calls.calls.Load(); p == 0 || p >= k {
		t.Errorf("%d pipelines for %d batch_refresh calls: not pipelined", p, k)
	}
	victim := held[7]
	watch := watchLoss(victim.Context(), victim.Lock())
	until := victim.Lock().ValidUntil()
	if err := rdb.Del(ctx, redislock.LockKey(keys[7])).Err(); err != nil {
		t.Fatal(err)
	}
	watch.before(t, until, redislock.ErrNotHeld)
	for i, h := range held {
		if i != 7 {
			renewedAfter(t, h.Lock(), until, 5*time.Second)
			if h.Err() != nil {
				t.Fatalf("%s: %v", keys[i], h.Err())
			}
		}
	}
}

// The master of a held, replicated lock is killed and its replica takes
// over: the renewals, refused by the dead master, make the client reload
// its slot map, and go on on the new master, where the lock is kept
// (go-redis alone would go on asking the dead master until its slot map is
// 10 s old, and the lease would run out).
func clusterKilledMasterFollowed(t *testing.T, rc realCluster) {
	ctx := ctxT(t, 30*time.Second)
	rdb := rc.Client(nil)
	c := newClient(t, rdb, redislock.WithObserver(nodeLog{t}))
	key := t.Name()
	master := rc.masterOf(t, key)
	replica := rc.replicaOf(t, master)
	defer func() { // leave the cluster whole
		if err := master.Revive(); err != nil {
			t.Error(err)
		} else if err := rc.WaitHealthy(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	const ttl = 4 * time.Second
	err := c.Run(ctx, key, ttl, func(ctx context.Context, l *redislock.Lock) error {
		if acked, err := master.Do(ctx, "WAIT", 1, 2000); err != nil || acked != int64(1) {
			t.Fatalf("WAIT = %v, %v", acked, err)
		}
		master.Kill()
		killed := time.Now()
		if err := rc.Failover(ctx, replica, redisproc.FailoverTakeover); err != nil {
			t.Fatal(err)
		}
		renewedAfter(t, l, validityFrom(killed, ttl), 10*time.Second)
		if !holds(t, replica.Server, key, l.Token()) {
			t.Fatal("the new master does not hold the lock")
		}
		return context.Cause(ctx)
	}, redislock.WithRefreshInterval(ttl/4))
	if err != nil {
		t.Fatalf("Run across a killed master = %v, want the lock kept", err)
	}
}

// nodeLog is an Observer that logs the failed node calls (the renewals
// during a failover).
type nodeLog struct{ t *testing.T }

func (n nodeLog) NodeFailed(_ context.Context, e redislock.NodeEvent) {
	n.t.Logf("node failed %s: %v (%T)", e.Op, e.Err, errors.Unwrap(e.Err))
}
