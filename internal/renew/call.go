package renew

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// batchKey is what the entries of one call share.
type batchKey struct {
	group Group
	ttl   time.Duration
}

// call is one call of the BatchFunc: queued on its node, then sent.
type call struct {
	key     batchKey
	entries []*Handle
	live    int                // entries neither stopped nor lost
	sent    bool               // a worker took it
	cancel  context.CancelFunc // of the call's context, once sent
}

// leave takes one entry out of the call; the last one to leave cancels it.
// Called with mu held.
func (c *call) leave() {
	c.live--
	if c.live == 0 && c.cancel != nil {
		c.cancel()
	}
}

// nodeQueue is the calls waiting for one node, and its workers.
type nodeQueue struct {
	node    string
	calls   []*call
	workers int
}

// enqueue queues c on its node and starts a worker for it if the node has
// fewer than perNode. Called with mu held.
func (r *Renewer) enqueue(c *call) {
	q := r.nodes[c.key.group.Node]
	if q == nil {
		q = &nodeQueue{node: c.key.group.Node}
		r.nodes[q.node] = q
	}
	q.calls = append(q.calls, c)
	if q.workers < r.perNode && r.enter() {
		q.workers++
		go r.work(q)
	}
}

// work runs q's calls one after another until none is left.
func (r *Renewer) work(q *nodeQueue) {
	defer r.running.Done()
	var reqs []Request
	var sent []*Handle
	for {
		r.mu.Lock()
		if len(q.calls) == 0 || r.closed {
			q.workers--
			if q.workers == 0 && r.nodes[q.node] == q {
				delete(r.nodes, q.node)
			}
			r.mu.Unlock()
			return
		}
		c := q.calls[0]
		q.calls[0] = nil
		q.calls = q.calls[1:]
		reqs, sent = reqs[:0], sent[:0]
		now := r.now()
		bound := time.Duration(1<<63 - 1)
		for _, h := range c.entries {
			if h.call != c || h.stopped || h.done {
				continue
			}
			reqs = append(reqs, Request{Key: h.key, Token: h.token, TTL: h.ttl, Due: r.at(h.due), Owner: h.owner})
			sent = append(sent, h)
			// Results that come after the first expiry, or later than an
			// interval, are of no use: the entry is lost or renewed anew.
			bound = min(bound, h.expiry()-now, h.interval)
		}
		c.entries = nil
		if len(sent) == 0 {
			r.mu.Unlock()
			continue
		}
		c.sent = true
		if bound <= 0 {
			r.mu.Unlock()
			r.finish(c, sent, time.Time{}, nil, context.DeadlineExceeded, true)
			continue
		}
		ctx, cancel := context.WithTimeout(r.ctx, bound)
		c.cancel = cancel
		r.mu.Unlock()
		start := r.clock.Now()
		results, err := r.batch(ctx, c.key.group, reqs)
		// Cut off by its bound: its errors (the call's, or its results')
		// say nothing of why renewals fail, only that this one came too
		// late to be of use.
		cutOff := errors.Is(ctx.Err(), context.DeadlineExceeded)
		cancel()
		if err == nil && len(results) != len(reqs) {
			err = fmt.Errorf("renew: %d results for %d requests", len(results), len(reqs))
		}
		r.finish(c, sent, start, results, err, cutOff)
	}
}

// finish applies the outcome of call c, sent at start with the entries
// sent: results, or err for all of them. cutOff reports that the call
// reached its own bound: an entry whose renewal failed keeps the error of
// its previous renewal, if that failed too, as the cause to report (a
// ReplicaError, a node down) rather than the deadline.
func (r *Renewer) finish(c *call, sent []*Handle, start time.Time, results []Result, err error, cutOff bool) {
	r.mu.Lock()
	now := r.now()
	sentAt := start.Sub(r.base)
	var reports []report
	for i, h := range sent {
		if h.call == c {
			h.call = nil
		}
		if h.stopped || h.done || r.closed {
			continue
		}
		res := Result{Err: err}
		if err == nil {
			res = results[i]
		}
		switch {
		case res.Renewed:
			until := sentAt + h.ttl.Truncate(time.Millisecond) - h.drift
			if until-h.lead <= now {
				// Confirmed too late to be of use: as if not confirmed.
				h.lastErr = lease.ErrGrantExpired
				h.due = r.retryAt(h, now)
				break
			}
			h.until, h.lastErr = until, nil
			h.due = sentAt + h.interval
			reports = append(reports, report{h: h, until: r.at(until)})
		case res.Err == nil || errors.Is(res.Err, lease.ErrNotHeld):
			cause := res.Err
			if cause == nil {
				cause = lease.ErrNotHeld
			}
			h.done = true
			heap.Remove(&r.heap, int(h.idx))
			reports = append(reports, report{h: h, cause: cause})
			continue
		default:
			if !cutOff || h.lastErr == nil {
				h.lastErr = res.Err
			}
			h.due = r.retryAt(h, now)
		}
		if h.expiry() <= now {
			heap.Remove(&r.heap, int(h.idx))
			reports = append(reports, r.expire(h))
			continue
		}
		h.next = min(h.due, h.expiry())
		heap.Fix(&r.heap, int(h.idx))
	}
	r.arm()
	r.report(reports)
	if r.finished != nil {
		r.finished()
	}
}
