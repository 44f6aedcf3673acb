package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/renew"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/observe"
)

// The held locks of a Client in single mode (standalone, Sentinel,
// Cluster) are renewed by one renew.Renewer per Client: one timer heap,
// one batch_refresh.lua call per node and slot for up to
// renew.DefaultBatchSize locks, the calls of one Cluster node sent in one
// pipeline. Quorum mode, a *redis.Ring and other clients renew each lock
// with its own refresher (backend.Refresher).

// errClientClosed is the cause of the loss of the locks the Client still
// renewed when it was closed.
var errClientClosed = errors.New("redislock: client closed while the lock was held")

// renewer returns the Client's renewer, made on first use; nil when its
// locks are renewed one by one (quorum mode, a Ring) or after Close.
func (c *Client) renewer() *renew.Renewer {
	if c.quorum || c.nodes[0].Kind != nodes.Standalone && c.nodes[0].Kind != nodes.Cluster {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if c.rn == nil {
		rn, err := renew.New(renew.Config{Batch: c.renewBatch})
		if err != nil {
			return nil // not with this Config
		}
		c.rn = rn
	}
	return c.rn
}

// closeRenewer stops the renewer, telling each lock it still renewed that
// it is lost (errClientClosed). Called by Close, after closed is set.
func (c *Client) closeRenewer() {
	c.mu.Lock()
	rn := c.rn
	c.mu.Unlock()
	if rn != nil {
		rn.CloseLost(errClientClosed)
	}
}

// kept is a lock renewed by the Client's renewer (keeper.Keep).
type kept struct {
	l       *Lock
	ttl     time.Duration
	lost    func(cause error)
	h       *renew.Handle // set once Add returned, guarded by l.mu
	removed atomic.Bool   // stopped or released: its callbacks are ignored
}

// keepBatched has the Client's renewer renew l; nil when it cannot (no
// renewer, an interval too tight for it, no validity left).
func (l *Lock) keepBatched(ttl, interval time.Duration, lost func(cause error)) *kept {
	rn := l.c.renewer()
	if rn == nil {
		return nil
	}
	k := &kept{l: l, ttl: ttl, lost: lost}
	h, err := rn.Add(renew.Entry{Group: l.c.renewGroup(l), Key: l.keys.Lock, Token: l.token, TTL: ttl, Interval: interval,
		Drift: l.opts.drift(ttl), ValidUntil: l.ValidUntil(), Owner: k})
	if err != nil {
		return nil
	}
	l.mu.Lock()
	k.h, l.kept = h, k
	l.mu.Unlock()
	return k
}

// renewGroup is the renewer's group of l: on a Cluster the master that
// serves its slot (so that the locks of one node share calls); a single
// group otherwise. A group is chosen once: after a failover the calls of
// an old group still go where go-redis routes their keys.
func (c *Client) renewGroup(l *Lock) renew.Group {
	var g renew.Group
	if cc, ok := c.nodes[0].RDB.(*redis.ClusterClient); ok {
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.releaseTimeout)
		defer cancel()
		if m, err := cc.MasterForKey(ctx, l.keys.Lock); err == nil {
			g.Node = m.Options().Addr
		} else {
			g.Node = "slot " + strconv.Itoa(int(keys.Slot(l.keys.Lock)))
		}
	}
	if o := &l.opts; o.replicas > 0 {
		// Locks that wait for replicas share calls only with their like.
		g.Node += fmt.Sprintf(" wait %d %v", o.replicas, o.replicaTimeout)
	}
	return g
}

// stop ends the renewal (Keep's stop).
func (k *kept) stop() {
	k.removed.Store(true)
	l := k.l
	l.mu.Lock()
	h := k.h
	if l.kept == k {
		l.kept = nil
	}
	l.mu.Unlock()
	h.Stop()
}

// remove ends the renewal without waiting (Release).
func (k *kept) remove() {
	k.removed.Store(true)
	k.h.Remove()
}

// Renewed records a renewal's validity (renew.Owner).
func (k *kept) Renewed(until time.Time) {
	if k.removed.Load() {
		return
	}
	l := k.l
	l.mu.Lock()
	if !l.released {
		l.until, l.ttl = until, k.ttl
	}
	l.mu.Unlock()
}

// Lost tells the holder (and the observers) that the lock is lost
// (renew.Owner).
func (k *kept) Lost(cause error) {
	if k.removed.Load() {
		return
	}
	l := k.l
	if errors.Is(cause, ErrNotHeld) {
		l.lost()
	}
	if obs := l.c.obs; obs != nil {
		obs.lockLost(context.Background(), observe.LossEvent{Key: l.key, Fence: l.fence, Held: time.Since(l.start), Cause: cause})
	}
	k.lost(cause)
}

// keptEntry returns l's renewer entry, if it has one.
func (l *Lock) keptEntry() *kept {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kept
}

// renewBatch is the renewer's BatchFunc: it renews reqs (locks of one
// node) with batch_refresh.lua, one call per slot, pipelined.
func (c *Client) renewBatch(ctx context.Context, _ renew.Group, reqs []renew.Request) ([]renew.Result, error) {
	first := reqs[0].Owner.(*kept).l
	ttl := reqs[0].TTL
	obs := c.obs
	var ctxs []context.Context
	if obs != nil {
		ctxs = make([]context.Context, len(reqs))
		for i, r := range reqs {
			l := r.Owner.(*kept).l
			ctxs[i] = obs.refreshStart(ctx, observe.RefreshStartEvent{Key: l.key, Fence: l.fence, TTL: ttl, Renewal: true})
		}
	}
	batches, index := slotBatches(reqs, c.cluster())
	n := c.nodes[0]
	var unacked []error // WithReplicas: per batch, the renewals too few replicas acknowledged
	acked := first.opts.replicas > 0
	err := c.call(ctx, n, c.nodeTimeout(&first.opts, ttl), false, "refresh", func(ctx context.Context, rdb redis.Scripter) error {
		switch {
		case acked:
			unacked = c.renewAcked(ctx, batches, ttl, &first.opts)
		case len(batches) == 1:
			b := &batches[0]
			b.Status, b.Err = script.BatchRefresh(ctx, rdb, b.Keys, b.Tokens, ttl.Milliseconds(), nil)
			return b.Err
		default:
			script.BatchRefreshPipelined(ctx, n.RDB, ttl.Milliseconds(), batches)
		}
		return nil
	}, nil)
	res := make([]renew.Result, len(reqs))
	done := batches // the batches as the call left them
	if nodes.IsAbandoned(err) || nodes.NotSent(err) {
		// The call may still write the batches: every renewal failed.
		c.reloadOnFault(ctx, err)
		for i := range res {
			res[i].Err = err
		}
		done = nil
	}
	viaCall := !acked && len(done) == 1 // its error is the call's, a *NodeError already
	if err != nil && viaCall {
		done[0].Err = err
	}
	for bi, b := range done {
		if b.Err != nil && !viaCall {
			b.Err = c.nodeErr(ctx, n.Index, "refresh", b.Err)
		}
		c.reloadOnFault(ctx, b.Err)
		for j, i := range index[bi] {
			switch {
			case b.Err != nil:
				res[i].Err = b.Err
			case b.Status[j] == script.BatchRenewed && unacked != nil && unacked[bi] != nil:
				res[i].Err = unacked[bi] // retried
			case b.Status[j] == script.BatchRenewed:
				res[i].Renewed = true
			default:
				res[i].Err = ErrNotHeld
			}
		}
	}
	if obs != nil {
		for i, r := range reqs {
			l := r.Owner.(*kept).l
			obs.refreshDone(ctxs[i], observe.RefreshDoneEvent{Key: l.key, Fence: l.fence, TTL: ttl, Renewal: true, Err: res[i].Err})
		}
	}
	return res, nil
}

// slotBatches splits reqs by Cluster slot (one batch when not on a
// Cluster), in their order, and tells where each batch's requests are in
// reqs.
func slotBatches(reqs []renew.Request, cluster bool) (batches []script.Batch, index [][]int) {
	at := map[uint16]int{}
	for i, r := range reqs {
		j := 0
		if cluster {
			s := keys.Slot(r.Key)
			var ok bool
			if j, ok = at[s]; !ok {
				j = len(batches)
				at[s] = j
				batches, index = append(batches, script.Batch{}), append(index, nil)
			}
		} else if len(batches) == 0 {
			batches, index = append(batches, script.Batch{}), append(index, nil)
		}
		b := &batches[j]
		b.Keys, b.Tokens, index[j] = append(b.Keys, r.Key), append(b.Tokens, r.Token), append(index[j], i)
	}
	return batches, index
}

// reloadOnFault makes a Cluster client reload its slot map when a
// renewal call failed without a reply from Redis (a refused connection, a
// timeout: its master may be gone), so that the renewals of its slots
// follow a failover rather than wait for go-redis' own reload, which comes
// on MOVED or when the map is 10 s old. go-redis runs at most one reload
// at a time.
func (c *Client) reloadOnFault(ctx context.Context, err error) {
	var reply redis.Error
	if err == nil || errors.As(err, &reply) {
		return
	}
	if cc, ok := c.nodes[0].RDB.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
}
