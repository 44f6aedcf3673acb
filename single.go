package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/renew"
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
	err := c.do(ctx, s.n, s.nodeTimeout(&l.opts, r.ttl), l.opts.autoPipeline && l.opts.replicas == 0, "obtain", (*obtainCall)(l))
	if err != nil {
		// The script may have run (a reply lost to a timeout or a cut
		// connection): release whatever it may have granted, unless it
		// never went out, or is abandoned (its settle releases it once it
		// has returned, so that the release cannot reach Redis first).
		// l.attempt may still be written (abandoned).
		r.markQueued()
		if !nodes.NotSent(err) && !nodes.IsAbandoned(err) {
			c.releaseOn(ctx, l, s.n)
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
	var held bool
	err := s.c.call(ctx, s.n, s.nodeTimeout(&l.opts, l.currentTTL()), l.opts.autoPipeline, "ttl", func(ctx context.Context, rdb redis.Scripter) (err error) {
		least, held, err = script.TTL(ctx, rdb, l.keys.Boxed[:1], l.arg)
		return err
	}, nil)
	if err != nil {
		return 0, 0, []error{err} // least and held may still be written (abandoned)
	}
	ok, errs = one(held, nil)
	return least, ok, errs
}

func (s *single) refresh(ctx context.Context, l *Lock, ttl time.Duration) (ok int, errs []error) {
	var held bool
	ms := ttl.Milliseconds()
	start := time.Now()
	err := s.c.call(ctx, s.n, s.nodeTimeout(&l.opts, ttl), l.opts.autoPipeline, "refresh",
		func(ctx context.Context, rdb redis.Scripter) (err error) {
			if l.opts.replicas == 0 {
				held, err = script.Refresh(ctx, rdb, l.keys.Boxed[:1], l.arg, ms)
				return err
			}
			return s.n.OnConn(ctx, l.keys.Lock, func(conn *redis.Conn) (err error) {
				if held, err = script.Refresh(ctx, conn, l.keys.Boxed[:1], l.arg, ms); err != nil || !held {
					return err
				}
				return awaitReplicas(ctx, conn, &l.opts, start, l.opts.validUntil(start, ttl))
			})
		}, nil)
	if err != nil {
		return 0, []error{err} // held may still be written (abandoned)
	}
	return one(held, nil)
}

func (s *single) release(ctx context.Context, l *Lock) (ok int, errs []error) {
	r := &releaseCall{l: l}
	if err := s.c.do(ctx, s.n, l.opts.releaseTimeout, l.opts.autoPipeline, "release", r); err != nil {
		return 0, []error{err} // r.released may still be written (abandoned)
	}
	return one(r.released, nil)
}

// releaseCall is one release of a Lock as a node call (nodes.Op), with
// its outcome: one allocation for both. An abandoned one needs no
// settling: a release that reached Redis late has released.
type releaseCall struct {
	l        *Lock
	released bool
}

func (r *releaseCall) Run(ctx context.Context, rdb redis.Scripter) (err error) {
	r.released, err = releaseScript(ctx, rdb, r.l)
	return err
}

func (*releaseCall) Settle(context.Context, error) {}

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
// or fair_obtain.lua, then WAIT with WithReplicas; an abandoned one is
// settled by releasing whatever it may have granted (settleRelease). Only
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
	return l.c.nodes[0].OnConn(ctx, l.keys.Lock, func(conn *redis.Conn) (err error) {
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

// Settle releases what the abandoned attempt may have granted and, in fair
// mode, takes its ticket out of the queue again: the Obtain call has left
// the queue already, but the attempt may have queued the ticket after that.
func (a *obtainCall) Settle(ctx context.Context, err error) {
	(*settleRelease)(a).settle(ctx, err)
	l := (*Lock)(a)
	if t := l.attempt.ticket; t != nil {
		leaveQueue(ctx, l.c, l.c.nodes[0], l.keys, t.id, &l.opts)
	}
}

// settleRelease is a Lock whose attempt's call was abandoned: once the
// call has returned, whatever it may have granted is released.
type settleRelease Lock

func (r *settleRelease) settle(ctx context.Context, _ error) {
	l := (*Lock)(r)
	l.c.releaseNow(ctx, l, l.c.nodes[0])
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

func (s *single) verdict(ok int, errs []error) error {
	switch {
	case ok > 0:
		return nil
	case len(errs) == 0:
		return ErrNotHeld
	}
	return s.failed(ErrNoQuorum, errs)
}

func (s *single) failed(err error, errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return &QuorumError{Err: err, Nodes: errs}
}

// lost: a grant found gone left nothing behind; one confirmed too late is
// given back.
func (s *single) lost(ctx context.Context, l *Lock, late bool) {
	if late {
		s.release(detach(ctx), l)
	}
}

func (s *single) publish(o *options) script.Publish {
	if o.sharded {
		return script.PublishSharded
	}
	return script.PublishPlain
}

func (s *single) sharded(asked bool) bool { return asked }

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

func (s *single) multi() (*single, error) { return s, nil }

// maxHandoffs is how many times in a row a lock is handed over within a
// Client before a Release lets every Client compete for it again: waiters
// of other Clients see the lock held throughout a chain of handoffs.
const maxHandoffs = 16

// handOff releases l and passes the lock to the longest-waiting caller of
// this Client for its key, if there is one (notified, not fair, not
// sharded), in one release.lua call: the waiter's fresh token takes the
// lock with its own TTL and the next fence, in the same atomic step. Where
// Redis cannot write that grant (out of memory) the call releases l all
// the same, and the waiter, woken, tries on its own. It reports handed =
// false when there is no such waiter (Release then releases as usual),
// else Release's result for l.
func (s *single) handOff(ctx context.Context, l *Lock) (handed bool, err error) {
	c := s.c
	if l.handoffs >= maxHandoffs || !l.opts.notify || l.opts.fair || l.opts.sharded {
		return false, nil
	}
	w := c.localWaker()
	if w == nil {
		return false, nil
	}
	sub, req := w.Claim(l.keys.Wake)
	if sub == nil {
		return false, nil
	}
	next := req.newLock()
	next.handoffs = l.handoffs + 1
	next.start = time.Now()
	var released bool
	var fence int64
	err = c.call(ctx, s.n, l.opts.releaseTimeout, l.opts.autoPipeline, "handoff", func(ctx context.Context, rdb redis.Scripter) (err error) {
		released, fence, err = script.Handoff{Keys: l.keys.Boxed[:1], Token: l.arg, RecordTTL: recordTTL(l.currentTTL(), l.opts.releaseTimeout, l.ttlArg),
			Publish: s.publish(&l.opts), To: next.arg, TTL: next.ttlArg, Holder: next.opts.holder}.Run(ctx, rdb)
		return err
	}, (*settleRelease)(next).settle)
	switch {
	case err != nil:
		// Unknown outcome: the waiter's token may hold the lock (given
		// back by the settle once an abandoned call has returned).
		w.Deliver(sub, nil, false)
		if !nodes.IsAbandoned(err) && !nodes.NotSent(err) {
			c.giveBack(ctx, next)
		}
		return true, err
	case fence > 0:
		next.fence = fence
		if next.confirmFrom(&next.opts, next.start, req.ttl) != nil || !w.Deliver(sub, next, true) {
			w.Deliver(sub, nil, false)
			c.giveBack(ctx, next)
		}
	default:
		w.Deliver(sub, nil, false)
		if released {
			c.wakeLocal(l) // released without handoff: the waiter tries
		}
	}
	if !released {
		return true, ErrNotHeld
	}
	return true, nil
}

func (s *single) releaseLater(ctx context.Context, l *Lock, done func(error)) {
	releaseLater(ctx, s, s.n, l, done)
}

// fairLeave returns what an Obtain call runs when it returns, granted or
// not: in fair mode, if an attempt queued its ticket, take the ticket out of
// the queue (on a detached context, bounded by the release timeout). After
// a grant the ticket is already gone and this changes nothing. nil when not
// in fair mode.
func (s *single) fairLeave(r *request) func() {
	if r.ticket == nil {
		return nil
	}
	return func() {
		if r.ticket.queued.Load() {
			leaveQueue(context.Background(), s.c, s.n, r.keys, r.ticket.id, &r.opts)
		}
	}
}

// leaveQueue takes ticket id out of k's fair queue on n, on a detached
// context bounded by the release timeout; ZREM of a ticket not queued
// changes nothing.
func leaveQueue(ctx context.Context, c *Client, n *nodes.Node, k keys.Lock, id string, o *options) {
	_ = c.call(background(ctx), n, o.releaseTimeout, false, "fair leave", func(ctx context.Context, rdb redis.Scripter) error {
		return script.FairLeave(ctx, rdb, k.FairLeave(), id, c.m.publish(o))
	}, nil)
}

// waitLate is how late Redis may end a WAIT, with room to spare: an idle
// Redis checks blocked clients' timeouts at its cron ticks, 1/hz apart
// (100 ms at the default hz 10); two ticks.
const waitLate = 200 * time.Millisecond

// awaitReplicas runs WAIT on conn, after the write that o's grant or
// refresh, sent at sent, made there, for the lease valid until until: nil
// when enough replicas acknowledged it in time, a *ReplicaError when too
// few did, or WAIT's own error. WAIT waits the replica timeout, but never
// past ctx's deadline, nor past until less the largest of a tenth of the
// validity left, the write's round trip (its reply takes as long) and
// waitLate, so that its answer comes while the lease is valid (a lease
// already over needs no replicas). With less than 1 ms left for it, it
// does not wait at all: WAIT 0 0 counts the replicas that have
// acknowledged so far (a WAIT k 0 would block for ever, a WAIT k 1 may
// end a cron tick late).
func awaitReplicas(ctx context.Context, conn *redis.Conn, o *options, sent, until time.Time) error {
	left := time.Until(until)
	d := min(o.replicaTimeout, left-max(left/10, time.Since(sent), waitLate))
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)-waitLate)
	}
	d = max(d.Truncate(time.Millisecond), 0)
	want := o.replicas
	if d == 0 {
		want = 0 // no time to wait: count the acknowledgements so far
	}
	n, err := nodes.Wait(ctx, conn, want, d.Milliseconds())
	switch {
	case err != nil:
		return err
	case n < o.replicas:
		return &ReplicaError{Want: o.replicas, Acked: n, Timeout: d}
	}
	return nil
}

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
