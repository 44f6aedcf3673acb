package semaphore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/lease"
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
	keys  []string // see scripts/prelude.lua
	wake  string   // the wake channel

	closed chan struct{} // closed by Close

	mu      sync.Mutex
	waiters map[string]chan struct{} // guarded by mu: by ticket
	done    bool                     // guarded by mu: Close was called

	subMu sync.Mutex    // serialises subscribing
	sub   *redis.PubSub // guarded by subMu: nil until a waiter needs it
	wg    sync.WaitGroup
}

// tagEscaper makes a name a valid hash-tag body (Redis ends a tag at the
// first '}'); the mapping is injective.
var tagEscaper = strings.NewReplacer("%", "%25", "}", "%7D")

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
	base := o.prefix + "{" + tagEscaper.Replace(name) + "}"
	return &Semaphore{
		rdb: rdb, name: name, limit: limit, o: o,
		keys:    []string{base, base + ":holders", base + ":queue", base + ":qdead", base + ":fence"},
		wake:    base + ":wake",
		closed:  make(chan struct{}),
		waiters: map[string]chan struct{}{},
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

func (s *Semaphore) acquire(ctx context.Context, ttl time.Duration, wait bool) (*Permit, error) {
	if err := lease.CheckTTL(ttl, s.o.drift); err != nil {
		return nil, err
	}
	select {
	case <-s.closed:
		return nil, lease.ErrClosed
	default:
	}
	token := rand.Text()
	var woken chan struct{}
	if wait {
		woken = s.register(token)
		defer s.unregister(token)
	}
	subscribed := false
	for {
		start := time.Now()
		r, err := s.attempt(ctx, token, ttl, wait)
		switch {
		case err != nil && subscribed && ctx.Err() != nil:
			s.withdraw(ctx, token)
			return nil, lease.Join(lease.ErrNotObtained, ctx.Err()) // ended while waiting
		case err != nil:
			s.withdraw(ctx, token) // the outcome is unknown
			return nil, err
		case r.status == acquireMismatch:
			s.withdraw(ctx, token)
			return nil, &LimitError{Name: s.name, Limit: s.limit, InUse: int(r.limit)}
		case r.status == acquireGranted:
			return s.grant(ctx, token, r, start, ttl)
		case !wait:
			return nil, lease.ErrNotObtained
		}
		hook(evQueued, token)
		if !subscribed {
			// Subscribe, then try once more: a release between the
			// attempt and the subscription is not missed.
			subscribed = true
			if s.subscribe(ctx) == nil {
				continue
			}
		}
		if err := s.sleep(ctx, woken, r); err != nil {
			s.withdraw(ctx, token)
			return nil, err
		}
	}
}

// attempt runs acquire.lua once.
func (s *Semaphore) attempt(ctx context.Context, token string, ttl time.Duration, queue bool) (acquireReply, error) {
	qttl := int64(0)
	if queue {
		qttl = s.o.queueTTL.Milliseconds()
	}
	v, err := acquireScript.Run(ctx, s.rdb, s.keys, token, ttl.Milliseconds(), s.limit, qttl,
		s.o.holder, max(ttl, minFenceTTL).Milliseconds(), s.wake).Int64Slice()
	if err != nil {
		return acquireReply{}, fmt.Errorf("redislock: semaphore %q: acquire: %w", s.name, err)
	}
	return parseAcquire(v)
}

// grant makes the Permit of a granted attempt that started at start; a
// grant confirmed after its validity is given back.
func (s *Semaphore) grant(ctx context.Context, token string, r acquireReply, start time.Time, ttl time.Duration) (*Permit, error) {
	p := &Permit{s: s, token: token, slot: r.slot, fence: r.fence}
	until := lease.ValidUntil(start, ttl, s.o.drift)
	if now := time.Now(); !now.Before(until) {
		_ = p.Release(ctx)
		return nil, lease.Expired(start, now, ttl, s.o.drift)
	}
	p.until = until
	return p, nil
}

// sleep waits for a wake-up, for the earliest lease to end (which
// publishes nothing), for a third of the queue TTL (to renew the place in
// the queue, and in case a wake-up was lost), for ctx or for Close.
func (s *Semaphore) sleep(ctx context.Context, woken <-chan struct{}, r acquireReply) error {
	d := s.o.queueTTL / 3
	if r.waitMS >= 0 && r.rank >= 0 && r.rank < int64(s.limit) {
		// Only waiters that a lease's end may let in wake for it.
		d = min(d, ms(r.waitMS)+time.Millisecond)
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
	_ = releaseScript.Run(ctx, s.rdb, s.keys, token, s.wake).Err()
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
	v, err := inspectScript.Run(ctx, s.rdb, s.keys).Result()
	if err != nil {
		return Info{}, fmt.Errorf("redislock: semaphore %q: inspect: %w", s.name, err)
	}
	limit, waiters, holders, err := parseInspect(v)
	if err != nil {
		return Info{}, err
	}
	return Info{Name: s.name, Limit: int(limit), Waiters: int(waiters), Holders: holders}, nil
}

// Close stops the Semaphore's background work: it closes its subscription
// connection and waits for its reader. Acquire calls still waiting return
// an error matching lease.ErrClosed (after withdrawing from the queue),
// later ones lease.ErrClosed. Permits already granted can still be
// renewed and released. It never closes the Redis client and is
// idempotent.
func (s *Semaphore) Close() error {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return nil
	}
	s.done = true
	close(s.closed)
	s.mu.Unlock()
	s.subMu.Lock()
	var err error
	if s.sub != nil {
		err = s.sub.Close()
	}
	s.subMu.Unlock()
	s.wg.Wait()
	if errors.Is(err, redis.ErrClosed) {
		err = nil
	}
	return err
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// evQueued is the test hook's event (export_test.go): an attempt of an
// Acquire call queued.
const evQueued = "queued"

var testHook atomic.Pointer[func(event, token string)]

func hook(event, token string) {
	if h := testHook.Load(); h != nil {
		(*h)(event, token)
	}
}
