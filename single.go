package redislock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
)

// single is the mode of a Client on one Redis (New): standalone, Sentinel
// or Cluster. Its calls run on the caller's goroutine. Only it has
// notified waiting across Clients, handoffs, fair queues, replica
// acknowledgement (WithReplicas), multi-key locks and batched renewal.
type single struct {
	c *Client
	n *nodes.Node
}

var _ mode = (*single)(nil)

// cluster reports whether the node is a Redis Cluster.
func (s *single) cluster() bool { return s.n.Kind == nodes.Cluster }

func (s *single) check(o *options) error {
	if o.replicas > 0 && !s.n.OwnConns() {
		return invalid("WithReplicas is not supported on %T", s.n.RDB)
	}
	return nil
}

func (s *single) nodeTimeout(o *options, ttl time.Duration) time.Duration {
	if o.nodeTimeout > 0 {
		return o.nodeTimeout
	}
	return ttl - o.drift(ttl)
}

func (s *single) obtain(ctx context.Context, r request) (*Lock, error) {
	l := r.newLock()
	if err := s.obtainOn(ctx, &r, l); err != nil {
		return nil, err
	}
	return l, nil
}

// obtainOn makes l's attempt: obtain.lua, or fair_obtain.lua in fair mode,
// then WAIT with WithReplicas.
func (s *single) obtainOn(ctx context.Context, r *request, l *Lock) error {
	c := s.c
	l.start = time.Now()
	l.attempt = attempt{ticket: r.ticket, ttl: r.ttl} // not r: the request stays on the caller's stack
	err := c.set.Do(ctx, s.n, s.nodeTimeout(&l.opts, r.ttl), l.opts.autoPipeline && l.opts.replicas == 0, "obtain", (*obtainCall)(l))
	if err != nil {
		// The script may have run (a reply lost to a timeout or a cut
		// connection): release whatever it may have granted, unless it
		// never went out, or still runs (its OnLate releases it once it
		// has returned, so that the release cannot reach Redis first).
		// l.attempt is the call's until then.
		r.markQueued()
		if !nodes.NoOutcome(err) {
			c.cleanUp(ctx, l, []*nodes.Node{s.n})
		}
		return err
	}
	rep, unacked := l.attempt.rep, l.attempt.unacked
	switch {
	case rep.Status == script.Held && rep.PTTL == script.NoExpiry:
		r.markQueued()
		return c.nodeErr(ctx, 0, "obtain", errNoExpiry)
	case rep.Status == script.Held:
		r.markQueued()
		return heldFor(r.keys, rep.PTTL)
	case rep.Status != script.Granted:
		return c.nodeErr(ctx, 0, "obtain", errUnexpected)
	}
	l.fence = rep.Fence
	if unacked != nil {
		s.release(detach(ctx), l)
		return unacked
	}
	if err := l.confirmFrom(&l.opts, l.start, r.ttl); err != nil {
		s.release(detach(ctx), l)
		return err
	}
	return nil
}

func (s *single) ttl(ctx context.Context, l *Lock) (least int64, ok int, errs []error) {
	p, err := nodes.Value(ctx, &s.c.set, s.n, s.nodeTimeout(&l.opts, l.currentTTL()), l.opts.autoPipeline, "ttl", l, ttlOn, nil)
	ok, errs = one(p.held, err)
	return p.ms, ok, errs
}

func (s *single) refresh(ctx context.Context, l *Lock, ttl time.Duration) (ok int, errs []error) {
	r := singleRefresh{n: s.n, l: l, ttl: ttl, start: time.Now()}
	return one(nodes.Value(ctx, &s.c.set, s.n, s.nodeTimeout(&l.opts, ttl), l.opts.autoPipeline, "refresh", r, refreshSingle, nil))
}

// singleRefresh is one refresh of l to ttl on n, sent at start.
type singleRefresh struct {
	n     *nodes.Node
	l     *Lock
	ttl   time.Duration
	start time.Time
}

// refreshSingle runs r: refresh.lua, then WAIT with WithReplicas.
func refreshSingle(ctx context.Context, rdb redis.Scripter, r singleRefresh) (held bool, err error) {
	l, ms := r.l, r.ttl.Milliseconds()
	if l.opts.replicas == 0 {
		return script.Refresh(ctx, rdb, l.keys.Boxed[:1], l.arg, ms)
	}
	err = r.n.OnConn(ctx, l.keys.Lock, func(conn *redis.Conn) (err error) {
		if held, err = script.Refresh(ctx, conn, l.keys.Boxed[:1], l.arg, ms); err != nil || !held {
			return err
		}
		return awaitReplicas(ctx, conn, &l.opts, r.start, l.opts.validUntil(r.start, r.ttl))
	})
	return held, err
}

func (s *single) release(ctx context.Context, l *Lock) (ok int, errs []error) {
	r := &releaseCall{l: l}
	if err := s.c.set.Do(ctx, s.n, l.opts.releaseTimeout, l.opts.autoPipeline, "release", r); err != nil {
		return 0, []error{err} // r is the call's until it returns
	}
	return one(r.released, nil)
}

// obtainScript sends l's attempt: obtain.lua, or fair_obtain.lua in fair
// mode (tk: the call's ticket).
func obtainScript(ctx context.Context, rdb redis.Scripter, tk *ticket, l *Lock) (script.ObtainReply, error) {
	if tk != nil {
		return script.FairObtain{Keys: l.keys.FairObtain(), Token: l.arg, TTL: l.ttlArg,
			QueueTTL: l.opts.queueTTL.Milliseconds(), Ticket: tk.id, Holder: l.opts.holder}.Run(ctx, rdb)
	}
	return script.Obtain{Keys: l.keys.Boxed[:1], Token: l.arg, TTL: l.ttlArg, Holder: l.opts.holder}.Run(ctx, rdb)
}

// attempt is what a Lock's obtain call (obtainCall) takes and writes:
// part of the Lock, so that the call needs no allocation of its own.
type attempt struct {
	ticket  *ticket       // fair mode: the Obtain call's ticket
	ttl     time.Duration // the lease asked for
	rep     script.ObtainReply
	unacked *ReplicaError // WithReplicas: a grant too few replicas acknowledged
}

// obtainCall is a Lock's obtain attempt as a node call (nodes.Op): obtain.lua,
// or fair_obtain.lua, then WAIT with WithReplicas; a late one releases
// whatever it may have granted once it returns (OnLate). Only
// without replicas, when its Run uses rdb alone, may it be batched
// (nodes.Node.Do).
type obtainCall Lock

func (a *obtainCall) Run(ctx context.Context, rdb redis.Scripter) (err error) {
	l := (*Lock)(a)
	at := &l.attempt
	if l.opts.replicas == 0 {
		at.rep, err = obtainScript(ctx, rdb, at.ticket, l)
		return err
	}
	return l.c.set.Nodes[0].OnConn(ctx, l.keys.Lock, func(conn *redis.Conn) (err error) {
		if at.rep, err = obtainScript(ctx, conn, at.ticket, l); err != nil || at.rep.Status != script.Granted {
			return err
		}
		err = awaitReplicas(ctx, conn, &l.opts, l.start, l.opts.validUntil(l.start, at.ttl))
		if errors.As(err, &at.unacked) {
			return nil
		}
		return err
	})
}

// OnLate releases what the attempt, which returned after its caller
// stopped waiting, may have granted and, in fair mode, takes its ticket
// out of the queue again: the Obtain call has left the queue already, but
// the attempt may have queued the ticket after that.
func (a *obtainCall) OnLate(ctx context.Context, _ error) {
	l := (*Lock)(a)
	l.c.cleanedUp(ctx, l.key, 0, l.c.releaseOn(ctx, l, l.c.set.Nodes[0]))
	if t := l.attempt.ticket; t != nil {
		leaveQueue(ctx, l.c, l.c.set.Nodes[0], l.keys, t.id, &l.opts)
	}
}

// one is the count of a single node's answer: yes, or its error.
func one(yes bool, err error) (ok int, errs []error) {
	switch {
	case err != nil:
		return 0, []error{err}
	case yes:
		return 1, nil
	}
	return 0, nil
}

// lost: a grant found gone left nothing behind; one confirmed too late is
// given back.
func (s *single) lost(ctx context.Context, l *Lock, late bool) {
	if late {
		s.release(detach(ctx), l)
	}
}

// publish is how releases with o wake waiters.
func (s *single) publish(o *options) script.Publish {
	if o.sharded {
		return script.PublishSharded
	}
	return script.PublishPlain
}

// wakerFor: one waker per Client, or in sharded mode on Redis Cluster one
// per master node (sharded channels live on the node that owns their
// slot); none on a Ring, which cannot hold one subscription for keys on
// different shards (waiters poll).
func (s *single) wakerFor(channel string, sharded bool) (rdb redis.UniversalClient, addr string, ok bool) {
	if s.n.Kind == nodes.Ring {
		return nil, "", false
	}
	rdb = s.n.RDB
	if !sharded {
		return rdb, "", true
	}
	cc, cluster := rdb.(*redis.ClusterClient)
	if !cluster {
		return rdb, "sharded", true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	node, err := cc.MasterForKey(ctx, channel)
	cancel()
	if err != nil {
		return nil, "", false // no notification: the waiter polls
	}
	return node, "sharded " + node.Options().Addr, true
}

// slotGroups sorts the keys' Redis keys into canonical order and groups
// them into script calls: one group, unless the node is a Redis Cluster
// client and the keys span several slots, then one group per slot.
func (s *single) slotGroups(prefix string, keyList []string) [][]keys.Lock {
	ks := make([]keys.Lock, len(keyList))
	for i, k := range keyList {
		ks[i] = keys.New(prefix, k)
	}
	slices.SortFunc(ks, func(a, b keys.Lock) int { return strings.Compare(a.Lock, b.Lock) })
	if !s.cluster() {
		return [][]keys.Lock{ks}
	}
	slices.SortStableFunc(ks, func(a, b keys.Lock) int { return int(keys.Slot(a.Lock)) - int(keys.Slot(b.Lock)) })
	var groups [][]keys.Lock
	for i, k := range ks {
		if i > 0 && keys.Slot(k.Lock) == keys.Slot(ks[i-1].Lock) {
			groups[len(groups)-1] = append(groups[len(groups)-1], k)
		} else {
			groups = append(groups, []keys.Lock{k})
		}
	}
	return groups
}

func locksOf(g []keys.Lock) []string {
	ks := make([]string, len(g))
	for i, k := range g {
		ks[i] = k.Lock
	}
	return ks
}
