package renew

import (
	"container/heap"
	"fmt"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// step runs when the head of the heap comes due (the timer): it sends every
// renewal due now or within the early window of the head, grouped into
// calls, and reports the entries whose validity is about to end.
func (r *Renewer) step() {
	r.mu.Lock()
	if !r.enter() {
		r.mu.Unlock()
		return
	}
	defer r.running.Done()
	now := r.now()
	var lost []report
	var pending []*Handle // in a call, not expired: back into the heap
	groups := map[batchKey][]*Handle{}
	var order []batchKey
	for len(r.heap) > 0 {
		h := r.heap[0]
		if h.next > now+time.Duration(r.early*float64(h.interval)) {
			break
		}
		heap.Pop(&r.heap)
		switch {
		case h.expiry() <= now:
			lost = append(lost, r.expire(h))
		case h.call != nil:
			pending = append(pending, h)
		default:
			k := batchKey{*h.group, h.ttl}
			if groups[k] == nil {
				order = append(order, k)
			}
			groups[k] = append(groups[k], h)
		}
	}
	for _, h := range pending {
		heap.Push(&r.heap, h)
	}
	for _, k := range order {
		hs := groups[k]
		for len(hs) > 0 {
			n := min(len(hs), r.batchSize)
			c := &call{key: k, entries: hs[:n:n], live: n}
			for _, h := range c.entries {
				h.call = c
				h.next = h.expiry() // until the call returns
				heap.Push(&r.heap, h)
			}
			r.enqueue(c)
			hs = hs[n:]
		}
	}
	r.arm()
	r.report(lost)
}

// report runs the callbacks of reports outside mu, marking their entries
// as reporting meanwhile (Stop waits for them). Called with mu held; it
// returns with mu released.
func (r *Renewer) report(reports []report) {
	for _, rep := range reports {
		rep.h.reporting = true
	}
	r.mu.Unlock()
	for _, rep := range reports {
		switch {
		case rep.cause != nil:
			rep.h.lost(rep.cause)
		case rep.h.renewed != nil:
			rep.h.renewed(rep.until)
		}
	}
	r.mu.Lock()
	for _, rep := range reports {
		rep.h.reporting = false
	}
	r.cond.Broadcast()
	r.mu.Unlock()
}

// report is a callback of one entry: Lost(cause) if cause is set, else
// Renewed(until).
type report struct {
	h     *Handle
	cause error
	until time.Time
}

// expire marks h lost by expiry and returns its report. Called with mu
// held, h out of the heap.
func (r *Renewer) expire(h *Handle) report {
	h.done = true
	if h.call != nil {
		h.call.leave()
		h.call = nil
	}
	cause := lease.ErrLeaseExpired
	if h.lastErr != nil {
		cause = fmt.Errorf("%w: last renewal: %w", lease.ErrLeaseExpired, h.lastErr)
	}
	return report{h: h, cause: cause}
}

// retryAt is when a failed renewal of h is tried again: after its
// interval, or half the time left before its expiry if that is shorter.
func (r *Renewer) retryAt(h *Handle, now time.Duration) time.Duration {
	return now + max(min(h.interval, (h.expiry()-now)/2), minRetry)
}
