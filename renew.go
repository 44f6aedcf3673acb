package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/renew"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
	"github.com/redislock-go/redislock/observe"
)

// The held locks of a Client in single mode (standalone, Sentinel,
// Cluster) are renewed by one renew.Renewer per Client: one timer heap,
// one batch_refresh.lua call per node and slot for up to
// renew.DefaultBatchSize locks, the calls of one Cluster node sent in one
// pipeline. Quorum mode, a *redis.Ring and other clients renew each lock
// with its own lease.Refresher.

var _ lease.Keeper = (*Lock)(nil)

// Keep renews the lock to ttl every interval until stop is called, for Run
// and lease.Hold, which find it as a lease.Keeper: lost is called, at most
// once, when a renewal finds the lock gone or the validity ends before a
// renewal got through, never later than the last ValidUntil, or at once,
// with ErrReleased, when the Lock's Release is called (on a nil *Lock: at
// once, with ErrNotHeld). The Client's observers see each renewal
// (RefreshDoneEvent.Renewal) and the loss (LossEvent).
//
// In single mode (standalone, Sentinel, Cluster) the Client's one renewer
// renews all its kept locks in batches (no goroutine or timer per lock);
// a Refresh by the holder moves the next renewal, and Release ends the
// renewal. Closing the Client reports its kept locks lost. In quorum mode,
// on a Ring, after Close, or with an interval that leaves the renewer too
// little time, each lock has its own timer and Refresh calls.
func (l *Lock) Keep(ttl, interval time.Duration, lost func(cause error)) (stop func()) {
	if l == nil {
		lost(ErrNotHeld)
		return func() {}
	}
	report := func(cause error) {
		if obs := l.c.obs; obs != nil && !errors.Is(cause, ErrReleased) {
			obs.lockLost(context.Background(), observe.LossEvent{Key: l.key, Fence: l.fence, Held: time.Since(l.start), Cause: cause})
		}
		lost(cause)
	}
	return l.watched().Keep(report, func(lost func(cause error)) func() {
		if s := l.c.single; s != nil {
			if k := s.keepBatched(l, ttl, interval, lost); k != nil {
				return k.stop
			}
		}
		return lease.Refresher{Lock: renewal{l}}.Keep(ttl, interval, lost)
	})
}

// watched returns the Lock's ReleaseWatch, made by its first Keep: a
// Release ends its renewal by Run and lease.Hold at once (lease.Keeper).
func (l *Lock) watched() *backend.ReleaseWatch {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watch == nil {
		l.watch = new(backend.ReleaseWatch)
	}
	return l.watch
}

// renewal is a Lock whose Refresh is a renewal of Run or lease.Hold.
type renewal struct{ *Lock }

func (r renewal) Refresh(ctx context.Context, ttl time.Duration) error {
	return r.refresh(ctx, ttl, true)
}

// errClientClosed is the cause of the loss of the locks the Client still
// renewed when it was closed.
var errClientClosed = errors.New("redislock: client closed while the lock was held")

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

// kept is a lock renewed by the Client's renewer (Lock.Keep).
type kept struct {
	l       *Lock
	ttl     time.Duration
	lost    func(cause error)
	h       *renew.Handle // set once Add returned, guarded by l.mu
	removed atomic.Bool   // stopped or released: its callbacks are ignored
}

// keepBatched has the Client's renewer renew l; nil when it cannot (no
// renewer, an interval too tight for it, no validity left).
func (s *single) keepBatched(l *Lock, ttl, interval time.Duration, lost func(cause error)) *kept {
	rn := s.renewer()
	if rn == nil {
		return nil
	}
	k := &kept{l: l, ttl: ttl, lost: lost}
	h, err := rn.Add(renew.Entry{Group: s.renewGroup(l), Key: l.keys.Lock, Token: l.token, TTL: ttl, Interval: interval,
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
func (s *single) renewGroup(l *Lock) renew.Group {
	var g renew.Group
	if s.cluster() {
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.releaseTimeout)
		defer cancel()
		if addr, ok := s.n.MasterAddr(ctx, l.keys.Lock); ok {
			g.Node = addr
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
	k.l.set(until, k.ttl)
}

// Lost tells the holder (and the observers) that the lock is lost
// (renew.Owner).
func (k *kept) Lost(cause error) {
	if k.removed.Load() {
		return
	}
	if errors.Is(cause, ErrNotHeld) {
		k.l.lost()
	}
	k.lost(cause) // Keep's: tells the observers
}

// keptEntry returns l's renewer entry, if it has one.
func (l *Lock) keptEntry() *kept {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kept
}

// renewBatch is the renewer's BatchFunc: it renews reqs (locks of one
// node) with batch_refresh.lua, one call per slot, pipelined.
func (s *single) renewBatch(ctx context.Context, _ renew.Group, reqs []renew.Request) ([]renew.Result, error) {
	c := s.c
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
	keyList, tokens := make([]string, len(reqs)), make([]string, len(reqs))
	for i, r := range reqs {
		keyList[i], tokens[i] = r.Key, r.Token
	}
	batches, index := script.SlotBatches(keyList, tokens, s.cluster())
	n := s.n
	var unacked []error // WithReplicas: per batch, the renewals too few replicas acknowledged
	acked := first.opts.replicas > 0
	err := c.set.Call(ctx, n, s.nodeTimeout(&first.opts, ttl), false, "refresh", func(ctx context.Context, rdb redis.Scripter) error {
		switch {
		case acked:
			unacked = s.renewAcked(ctx, batches, ttl, &first.opts)
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
	if nodes.NoOutcome(err) {
		// The call may still write the batches: every renewal failed.
		n.ReloadOnFault(ctx, err)
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
		n.ReloadOnFault(ctx, b.Err)
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

// multiLease is a MultiLock as lease.RunLock needs it: its renewal, release
// and validity. (Its Key and Fence stand for the whole set.)
type multiLease struct{ *MultiLock }

// Keep renews the set by Refresh, and reports its Release at once
// (lease.Keeper).
func (m multiLease) Keep(ttl, interval time.Duration, lost func(cause error)) (stop func()) {
	return m.watch.Keep(lost, func(lost func(cause error)) func() {
		return lease.Refresher{Lock: m}.Keep(ttl, interval, lost)
	})
}

func (m multiLease) Key() string { return strings.Join(m.keys, ",") }

func (m multiLease) Fence() int64 { return 0 }

// renewer returns the Client's renewer, made on first use; nil on a Ring
// or another client (its locks are renewed one by one) or after Close.
func (s *single) renewer() *renew.Renewer {
	if !s.n.OwnConns() {
		return nil
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if c.rn == nil {
		rn, err := renew.New(renew.Config{Batch: s.renewBatch})
		if err != nil {
			return nil // not with this Config
		}
		c.rn = rn
	}
	return c.rn
}
