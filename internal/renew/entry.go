package renew

import (
	"container/heap"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// Entry is a lease to renew.
type Entry struct {
	// Group is the node and slot of Key (see Group).
	Group Group
	// Key and Token name the grant.
	Key, Token string
	// TTL is the lease each renewal asks for (whole milliseconds).
	TTL time.Duration
	// Interval is how often it is renewed: positive, and leaving time
	// before the validity ends (Interval + lease.LossLead(TTL, Interval) <
	// TTL - Drift).
	Interval time.Duration
	// Drift is the part of TTL a renewal's validity gives up: a renewal
	// sent at t is valid until t + TTL - Drift (lease.Drift).
	Drift time.Duration
	// ValidUntil is the validity confirmed so far.
	ValidUntil time.Time
	// Renewed, if set, is called with the new validity after each
	// confirmed renewal.
	Renewed func(validUntil time.Time)
	// Lost is called once when the grant is found gone (a cause matching
	// lease.ErrNotHeld) or its validity is about to end without a
	// confirmed renewal (lease.ErrLeaseExpired, with the last renewal's
	// error), lease.LossLead(TTL, Interval) before ValidUntil. Required
	// unless Owner is set.
	Lost func(cause error)
	// Owner, if set, is told instead of Renewed and Lost (which must then
	// be nil), and is handed back in each Request of the entry: an owner
	// that has a value per entry anyway costs no closures.
	Owner Owner
}

// Owner is told of an entry's outcomes, as Entry.Renewed and Entry.Lost
// are.
type Owner interface {
	Renewed(validUntil time.Time)
	Lost(cause error)
}

// funcOwner is the Owner of an entry given Renewed and Lost.
type funcOwner struct {
	renewed func(time.Time)
	lost    func(error)
}

func (f *funcOwner) Renewed(until time.Time) {
	if f.renewed != nil {
		f.renewed(until)
	}
}

func (f *funcOwner) Lost(cause error) { f.lost(cause) }

// Handle is an entry being renewed; Stop ends its renewal.
type Handle struct {
	r          *Renewer
	group      *Group // interned: one per distinct Group (Renewer.groups)
	key, token string
	ttl        time.Duration
	interval   time.Duration
	drift      time.Duration
	lead       time.Duration // the loss by expiry is reported this long before the validity ends

	// Guarded by r.mu. Times are offsets from r.base.
	until     time.Duration // validity confirmed
	due       time.Duration // when the next renewal is due
	next      time.Duration // heap key: due, or the expiry while a call is pending or sooner
	idx       int32         // in r.heap; -1 when not in it (int32: packed with the flags, 8 bytes less per entry)
	call      *call         // the call this entry is part of, nil if none
	stopped   bool          // Stop or Close: no more callbacks
	done      bool          // the loss was reported
	reporting bool          // a callback of this entry is running
	lastErr   error         // the last renewal's error
	owner     Owner
}

// Add starts renewing e; its first renewal is due Interval after the
// request of the grant began (ValidUntil - (TTL - Drift)), at the latest
// Interval from now: a grant that took long to return is renewed early. Bad
// entries are errors matching lease.ErrInvalidArgument; after Close, Add
// fails with ErrClosed.
func (r *Renewer) Add(e Entry) (*Handle, error) {
	lead := lease.LossLead(e.TTL, e.Interval)
	switch {
	case e.Owner == nil && e.Lost == nil:
		return nil, lease.Invalid("renew: nil Lost")
	case e.Owner != nil && (e.Lost != nil || e.Renewed != nil):
		return nil, lease.Invalid("renew: both an Owner and callbacks")
	case e.Key == "":
		return nil, lease.Invalid("renew: empty key")
	case e.TTL < time.Millisecond:
		return nil, lease.Invalid("renew: TTL %v is below 1ms", e.TTL)
	case e.Drift < 0:
		return nil, lease.Invalid("renew: negative drift %v", e.Drift)
	case e.Interval <= 0 || e.Interval+lead >= e.TTL.Truncate(time.Millisecond)-e.Drift:
		return nil, lease.Invalid("renew: interval %v leaves no time to renew a TTL of %v", e.Interval, e.TTL)
	case e.ValidUntil.IsZero():
		return nil, lease.Invalid("renew: zero ValidUntil")
	}
	h := &Handle{r: r, key: e.Key, token: e.Token, ttl: e.TTL, interval: e.Interval, drift: e.Drift, lead: lead,
		owner: e.Owner, idx: -1}
	if h.owner == nil {
		h.owner = &funcOwner{renewed: e.Renewed, lost: e.Lost}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	h.group = r.groups[e.Group]
	if h.group == nil {
		h.group = &e.Group
		r.groups[e.Group] = h.group
	}
	now := r.now()
	h.until = e.ValidUntil.Sub(r.base)
	h.due = max(min(now+e.Interval, h.renewalOf(h.until)), now)
	h.next = min(h.due, h.expiry())
	heap.Push(&r.heap, h)
	if h.idx == 0 {
		r.arm()
	}
	return h, nil
}

// renewalOf is when the renewal of a grant valid until until is due: an
// interval after its request began, at until - (TTL - Drift).
func (h *Handle) renewalOf(until time.Duration) time.Duration {
	return until - h.ttl.Truncate(time.Millisecond) + h.drift + h.interval
}

// expiry is when the entry's loss by expiry is due.
func (h *Handle) expiry() time.Duration { return h.until - h.lead }

// Confirmed tells the Renewer that the owner renewed the grant itself
// until validUntil (an explicit Refresh): the entry is not reported lost
// by expiry before then, and its next renewal is due when it would be had
// the Renewer made that renewal (an interval after the refresh began). An
// earlier validUntil is ignored.
func (h *Handle) Confirmed(validUntil time.Time) {
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	until := validUntil.Sub(r.base)
	if h.stopped || h.done || until <= h.until {
		return
	}
	h.until = until
	if h.idx < 0 {
		return
	}
	if h.call != nil {
		h.next = h.expiry()
	} else {
		h.due = max(h.due, min(r.now()+h.interval, h.renewalOf(until)))
		h.next = min(h.due, h.expiry())
	}
	heap.Fix(&r.heap, int(h.idx))
	r.arm()
}

// Stop ends the entry's renewal. When it returns, neither Renewed nor Lost
// is called any more and no call with the entry is in flight (it waits
// for one; the call's context is cancelled once none of its entries is
// left). Idempotent; it must not be called from the entry's Renewed or
// Lost.
func (h *Handle) Stop() {
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	h.remove()
	for h.reporting || h.call != nil && !r.closed {
		r.cond.Wait()
	}
}

// Remove ends the entry's renewal without waiting: a call in flight with
// the entry may still finish, and a callback of it already decided may
// still run (the owner ignores it), but no renewal is sent for it any
// more. It may be called from anywhere, the entry's callbacks included;
// Stop may follow.
func (h *Handle) Remove() {
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	h.remove()
}

// remove takes the entry out of the heap and its call. Called with mu held.
func (h *Handle) remove() {
	r := h.r
	if h.stopped {
		return
	}
	h.stopped = true
	if h.idx >= 0 {
		heap.Remove(&r.heap, int(h.idx))
	}
	if h.call != nil {
		h.call.leave()
		if !h.call.sent {
			h.call = nil // the worker will leave it out
		}
	}
	if r.stopped != nil {
		r.stopped(h)
	}
}

// entryHeap orders entries by their next event.
type entryHeap []*Handle

func (q entryHeap) Len() int           { return len(q) }
func (q entryHeap) Less(i, j int) bool { return q[i].next < q[j].next }
func (q entryHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx, q[j].idx = int32(i), int32(j)
}
func (q *entryHeap) Push(x any) {
	h := x.(*Handle)
	h.idx = int32(len(*q))
	*q = append(*q, h)
}
func (q *entryHeap) Pop() any {
	old := *q
	n := len(old)
	h := old[n-1]
	old[n-1] = nil
	h.idx = -1
	*q = old[:n-1]
	return h
}
