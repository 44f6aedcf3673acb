package semaphore

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/internal/wake"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
	"github.com/redislock-go/redislock/observe"
)

// Semaphore is a named set of limit slots on one Redis (standalone,
// Sentinel or Cluster), shared by every process that uses the name with
// the same limit. Its methods are safe for concurrent use. It owns the
// subscription on which releases wake its waiters: Close it when done.
type Semaphore struct {
	rdb   redis.UniversalClient
	name  string
	limit int
	o     options
	keys  []string // see scripts/semaphore_prelude.lua
	wake  string   // the wake channel
	obs   *observers

	// waker wakes the waiters a release names. Its subscription is made
	// by the first waiter and kept until Close; after the connection is
	// replaced, every waiter is woken, since a wake-up may have been lost
	// meanwhile.
	waker     *wake.Waker[struct{}, struct{}]
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
}

// New returns the Semaphore name with limit slots on rdb. Every process
// using name must use the same limit while the semaphore is in use
// (Acquire reports ErrLimitMismatch otherwise). A nil rdb, an empty name, a
// limit outside [1, MaxLimit] or an invalid option is an error matching
// lease.ErrInvalidArgument. Close never closes rdb.
func New(rdb redis.UniversalClient, name string, limit int, opts ...Option) (*Semaphore, error) {
	switch {
	case nodes.IsNil(rdb):
		return nil, lease.Invalid("semaphore: nil Redis client")
	case name == "":
		return nil, lease.Invalid("semaphore: empty name")
	case limit < 1 || limit > MaxLimit:
		return nil, lease.Invalid("semaphore: limit %d is not in [1, %d]", limit, MaxLimit)
	}
	o := defaults()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	ks, wakeKey := keys.Semaphore(o.prefix, name)
	return &Semaphore{
		rdb: rdb, name: name, limit: limit, o: o, obs: newObservers(o.observers),
		keys:   ks,
		wake:   wakeKey,
		waker:  wake.NewNamed[struct{}, struct{}](rdb, nil),
		closed: make(chan struct{}),
	}, nil
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Limit returns the number of slots.
func (s *Semaphore) Limit() int { return s.limit }

// Acquire takes a slot for ttl and returns its Permit, waiting while all
// slots are held. Waiters are served in arrival order, across processes:
// a release wakes the waiter at the head of the queue (pub/sub), and a
// lease that ends without release (its holder died) is noticed when it
// ends. Acquire waits until ctx ends (give ctx a deadline to bound it),
// then withdraws from the queue and returns an error matching
// lease.ErrNotObtained and ctx.Err(); after Close it returns
// lease.ErrClosed.
//
// The permit's lease ends on the Redis server's clock: hold it with
// lease.Hold or lease.RunLock to renew it. A ttl below 1 ms or leaving no
// validity after drift is an error matching lease.ErrInvalidArgument.
// Redis errors are returned as such; a request whose outcome is unknown
// is withdrawn (its slot, if granted, released) in the background.
func (s *Semaphore) Acquire(ctx context.Context, ttl time.Duration) (*Permit, error) {
	return s.acquire(ctx, ttl, true)
}

// TryAcquire makes one attempt: it returns a Permit if a slot is free and
// no one waits ahead, else an error matching lease.ErrNotObtained. See
// Acquire for the rest.
func (s *Semaphore) TryAcquire(ctx context.Context, ttl time.Duration) (*Permit, error) {
	return s.acquire(ctx, ttl, false)
}

func (s *Semaphore) acquire(ctx context.Context, ttl time.Duration, wait bool) (p *Permit, err error) {
	if err := backend.CheckTTL(ttl, s.o.drift); err != nil {
		return nil, err
	}
	select {
	case <-s.closed:
		return nil, lease.ErrClosed
	default:
	}
	if obs := s.obs; obs != nil && len(obs.acquire) > 0 {
		start := time.Now()
		ctx = obs.acquireStart(ctx, observe.AcquireStartEvent{Semaphore: s.name, TTL: ttl})
		defer func() {
			obs.acquireDone(ctx, observe.AcquireDoneEvent{Semaphore: s.name, TTL: ttl, Slot: p.Slot(), Fence: p.Fence(),
				Wait: time.Since(start), Err: err})
		}()
	}
	token := rand.Text()
	var sub *wake.Sub[struct{}, struct{}]
	defer func() {
		if sub != nil {
			sub.Stop()
		}
	}()
	for {
		start := time.Now()
		r, err := s.attempt(ctx, token, ttl, wait)
		switch {
		case err != nil && sub != nil && ctx.Err() != nil:
			s.withdraw(ctx, token)
			return nil, lease.Join(lease.ErrNotObtained, ctx.Err()) // ended while waiting
		case err != nil:
			s.withdraw(ctx, token) // the outcome is unknown
			return nil, err
		case r.Status == script.SemMismatch:
			s.withdraw(ctx, token)
			return nil, &LimitError{Name: s.name, Limit: s.limit, InUse: int(r.Limit)}
		case r.Status == script.SemGranted:
			return s.grant(ctx, token, r, start, ttl)
		case !wait:
			return nil, lease.ErrNotObtained
		}
		if s.o.hook != nil {
			s.o.hook(evQueued, token)
		}
		if sub == nil {
			if obs := s.obs; obs != nil {
				obs.queued(ctx, observe.QueueEvent{Semaphore: s.name, Rank: r.Rank})
			}
			// Subscribe, then try once more: a release between the
			// attempt and the subscription is not missed. Without a
			// confirmation (Redis unreachable, the confirmation late),
			// the waiter is left to its timers.
			if sub = s.waker.Add(s.wake, token, struct{}{}, false); sub == nil {
				s.withdraw(ctx, token)
				return nil, lease.Join(lease.ErrNotObtained, lease.ErrClosed)
			}
			if ok, _ := sub.Confirmed(ctx, subscribeTimeout); ok {
				continue
			}
		}
		if err := s.sleep(ctx, sub.Wake(), r); err != nil {
			s.withdraw(ctx, token)
			return nil, err
		}
	}
}

// attempt runs semaphore_acquire.lua once.
func (s *Semaphore) attempt(ctx context.Context, token string, ttl time.Duration, queue bool) (script.SemAcquireReply, error) {
	a := script.SemAcquire{Keys: s.keys, Token: token, TTL: ttl.Milliseconds(), Limit: s.limit,
		Holder: s.o.holder, FenceTTL: max(ttl, minFenceTTL).Milliseconds(), Wake: s.wake}
	if queue {
		a.QueueTTL = s.o.queueTTL.Milliseconds()
	}
	r, err := a.Run(ctx, s.rdb)
	if err != nil {
		return r, fmt.Errorf("redislock: semaphore %q: acquire: %w", s.name, err)
	}
	return r, nil
}

// grant makes the Permit of a granted attempt that started at start; a
// grant confirmed after its validity is given back.
func (s *Semaphore) grant(ctx context.Context, token string, r script.SemAcquireReply, start time.Time, ttl time.Duration) (*Permit, error) {
	p := &Permit{s: s, token: token, slot: r.Slot, fence: r.Fence, start: start}
	until := backend.ValidUntil(start, ttl, s.o.drift)
	if now := time.Now(); !now.Before(until) {
		_ = p.Release(ctx)
		return nil, backend.Expired(start, now, ttl, s.o.drift)
	}
	p.until = until
	return p, nil
}

// sleep waits for a wake-up, for the earliest lease to end (which
// publishes nothing), for a third of the queue TTL (to renew the place in
// the queue, and in case a wake-up was lost), for ctx or for Close.
func (s *Semaphore) sleep(ctx context.Context, woken <-chan struct{}, r script.SemAcquireReply) error {
	d := s.o.queueTTL / 3
	if r.WaitMS >= 0 && r.Rank >= 0 && r.Rank < int64(s.limit) {
		// Only waiters that a lease's end may let in wake for it.
		d = min(d, ms(r.WaitMS)+time.Millisecond)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-woken:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return lease.Join(lease.ErrNotObtained, ctx.Err())
	case <-s.closed:
		return lease.Join(lease.ErrNotObtained, lease.ErrClosed)
	}
}

// withdraw takes token out of the queue and releases the slot it may have
// been granted, on a context detached from ctx's cancellation.
func (s *Semaphore) withdraw(ctx context.Context, token string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.releaseTimeout)
	defer cancel()
	_, _ = script.SemRelease(ctx, s.rdb, s.keys, token, s.wake)
}

// Holder is one holder of a slot, as Inspect reports it.
type Holder struct {
	Slot   int           // the slot, in [0, limit)
	Fence  int64         // the permit's fence
	Holder string        // the identity its Semaphore recorded (WithHolder); "" if none
	TTL    time.Duration // remaining lease on the server's clock
	Age    time.Duration // time since it was granted
}

// Info is what Inspect reports about a semaphore.
type Info struct {
	Name    string
	Limit   int      // the limit in use; 0 when no one holds or waits
	Waiters int      // requests in the queue
	Holders []Holder // by slot
}

// Inspect reports the holders and waiters of the semaphore as the Redis
// server sees it now (leases that have ended are not listed). Tokens are
// never reported.
func (s *Semaphore) Inspect(ctx context.Context) (Info, error) {
	r, err := script.SemInspect(ctx, s.rdb, s.keys)
	if err != nil {
		return Info{}, fmt.Errorf("redislock: semaphore %q: inspect: %w", s.name, err)
	}
	info := Info{Name: s.name, Limit: int(r.Limit), Waiters: int(r.Waiters)}
	for _, h := range r.Holders {
		info.Holders = append(info.Holders, Holder{Slot: h.Slot, Fence: h.Fence, Holder: h.Holder, TTL: ms(h.TTL), Age: ms(h.Age)})
	}
	return info, nil
}

// Close stops the Semaphore's background work: it closes its subscription
// connection and waits for its reader. Acquire calls still waiting return
// an error matching lease.ErrClosed (after withdrawing from the queue),
// later ones lease.ErrClosed. Permits already granted can still be
// renewed and released. It never closes the Redis client and is
// idempotent.
func (s *Semaphore) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.waker.Close()
	})
	return nil
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// evQueued is the test hook's event (options.hook, export_test.go): an
// attempt of an Acquire call queued.
const evQueued = "queued"
