// Package redislock provides distributed locks on Redis: leases taken and
// given back by atomic Lua scripts, a fencing token minted with every grant,
// renewal that reports loss, and a quorum (Redlock) mode over N independent
// Redis masters.
//
// A lease lock is an efficiency tool on its own: a holder paused past its
// lease (GC, SIGSTOP, a slow network) still believes it holds the lock while
// another client holds it too. Where correctness matters, have the protected
// resource check the lock's fence (see Lock.Fence and FencedSet).
package redislock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client obtains locks on one Redis (New) or on a majority of independent
// Redis masters (NewQuorum). It is safe for concurrent use.
type Client struct {
	nodes     []redis.UniversalClient
	pipes     []pipe // per node (pipeline.go)
	quorum    bool
	deadlines bool // every node's go-redis client applies ctx deadlines to its socket
	opts      options
	err       error // reported by every call: invalid client or options

	seen atomic.Int64 // quorum mode: highest fence counter seen on any node

	mu     sync.Mutex
	closed bool
	bg     sync.WaitGroup    // background workers: quorum calls, clean-up of partial or unknown grants
	work   chan func()       // to an idle background worker
	stop   chan struct{}     // closed by Close: idle workers exit
	wakers map[string]*waker // notified waiting (wait.go); closed by Close
}

func makeClient(nodes []redis.UniversalClient) *Client {
	return &Client{nodes: nodes, pipes: make([]pipe, len(nodes)), opts: defaultOptions(),
		work: make(chan func()), stop: make(chan struct{})}
}

// New returns a Client for one Redis: standalone, Sentinel (a failover
// client) or Cluster. opts set defaults for every call. A nil rdb or an
// invalid option is reported, matching ErrInvalidArgument, by every call.
// Close never closes rdb.
func New(rdb redis.UniversalClient, opts ...Option) *Client {
	c := makeClient([]redis.UniversalClient{rdb})
	c.opts.add(opts)
	if rdb == nil {
		c.err = invalid("nil redis client")
	} else {
		c.err = c.opts.validate()
		c.deadlines = honoursDeadlines(rdb)
	}
	return c
}

// honoursDeadlines reports whether go-redis applies context deadlines to the
// socket for rdb (its ContextTimeoutEnabled option). Where it does not, the
// library's per-call timeouts are not sent as context deadlines (they would
// only cost allocations): go-redis' own Dial/Read/WriteTimeout bound each
// call, and quorum mode stops waiting for a node at its node timeout anyway.
func honoursDeadlines(rdb redis.UniversalClient) bool {
	switch r := rdb.(type) {
	case *redis.Client:
		return r.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return r.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return r.Options().ContextTimeoutEnabled
	}
	return true
}

// Close waits for the client's background clean-up (releases of partial or
// unknown grants, each bounded by the release timeout) and makes further
// calls fail with ErrClosed. Locks already obtained can still be released.
// It also closes the client's subscription connection for notified waiting
// and stops its goroutines; Obtain calls still waiting fall back to their
// backoff. It never closes the caller's redis clients.
func (c *Client) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.stop)
	}
	c.mu.Unlock()
	c.closeWakers()
	c.bg.Wait()
	return nil
}

// workerIdle is how long a background worker waits for more work before it
// exits.
const workerIdle = time.Second

// background runs f on a background worker, which Close waits for; after
// Close, f runs inline. Workers are reused: a goroutine's stack, once grown
// by a call into go-redis, is kept (a fresh goroutine per node call spent
// about a fifth of a quorum Obtain+Release's CPU growing stacks).
func (c *Client) background(f func()) {
	select {
	case c.work <- f:
		return
	default:
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		f()
		return
	}
	c.bg.Add(1)
	c.mu.Unlock()
	go c.worker(f)
}

// worker runs f, then whatever work comes, until it has been idle for
// workerIdle or the Client is closed.
func (c *Client) worker(f func()) {
	defer c.bg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-c.work:
		case <-idle.C:
			return
		case <-c.stop:
			return
		}
	}
}

// callOptions resolves per-call options over the client's defaults.
func (c *Client) callOptions(opts []Option) (options, error) {
	if c == nil {
		return options{}, invalid("nil *Client")
	}
	if c.err != nil {
		return options{}, c.err
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return options{}, ErrClosed
	}
	if len(opts) == 0 {
		return c.opts, nil
	}
	o := c.opts
	o.add(opts)
	if err := o.validate(); err != nil {
		return options{}, err
	}
	return o, nil
}

func (o *options) checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return invalid("TTL %v is below 1ms", ttl)
	}
	if ttl.Truncate(time.Millisecond) <= o.drift(ttl) {
		return invalid("TTL %v leaves no validity after drift %v", ttl, o.drift(ttl))
	}
	return nil
}

// Obtain takes the lock on key for ttl and returns it, with a fresh random
// token and a fencing token (Lock.Fence) greater than any earlier grant's on
// this key. The TTL is rounded down to whole milliseconds.
//
// While the lock is held by someone else Obtain retries per WithRetry
// (default: no retry) and then returns ErrNotObtained, joined with ctx.Err()
// when ctx ended the wait. A context without deadline bounds retries by
// WithMaxWait (default: ttl). An unreachable Redis, a Redis error reply or a
// lost quorum is returned as such (a *NodeError, ErrNoQuorum), never as
// ErrNotObtained. Bad input is an error matching ErrInvalidArgument, returned
// before any call to Redis.
//
// A grant is returned only while valid: ValidUntil = request start + TTL -
// (TTL * drift factor + 2ms), on the monotonic clock. Grants whose outcome is
// unknown (a timeout, a cut connection) are released in the background.
func (c *Client) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error) {
	o, err := c.callOptions(opts)
	if err != nil {
		return nil, err
	}
	if key == "" {
		return nil, invalid("empty key")
	}
	if err := o.checkTTL(ttl); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, invalid("nil context")
	}
	if o.fair {
		o.ticket = &ticket{id: rand.Text()} // this call's place in the fair queue (fair.go)
	}
	req := request{c: c, key: key, keys: makeKeys(o.prefix, key), opts: o, ttl: ttl}

	deadline := o.waitDeadline(ctx, ttl)
	// The wait state is made at the first wait; in fair mode at once, so
	// that every way out of Obtain leaves the queue.
	var ws *waitState
	defer func() { ws.stop() }()
	if o.fair {
		ws = c.obtainWaiter(req)
	}
	for attempt := 1; ; attempt++ {
		var l *Lock
		var err error
		if attempt == 1 && c.queueBehindLocalWaiters(&o, req.keys) || ws.behind() {
			// Other callers of this Client wait for this key, longer than
			// this one: wait behind them instead of overtaking them (a
			// release wakes or hands the lock to the longest-waiting one),
			// as if this attempt found the lock held.
			err = heldFor(req.keys, -1)
		} else {
			l, err = c.obtainOnce(ctx, &req)
		}
		switch {
		case err == nil:
			return l, nil
		case ctx.Err() != nil && attempt > 1:
			// The ctx ended while waiting for a contended lock.
			return nil, errors.Join(ErrNotObtained, ctx.Err())
		case ctx.Err() != nil:
			return nil, errors.Join(err, ctx.Err())
		case !errors.Is(err, ErrNotObtained):
			return nil, err
		}
		// err matches ErrNotObtained, and may carry failing nodes' causes.
		wait, werr := deadline.next(&o, attempt, err)
		if werr != nil {
			return nil, werr
		}
		// Wait for the backoff, a release (notified mode: see wait.go) or
		// the end of ctx.
		if ws == nil {
			ws = c.obtainWaiter(req)
		}
		switch granted, err := ws.waitRetry(ctx, wait, err); {
		case granted:
			return ws.granted, nil
		case err != nil:
			return nil, err
		}
	}
}

// waitDeadline is when an Obtain call stops waiting for a contended lock:
// ctx's deadline (bounded), else now plus WithMaxWait, by default the TTL.
type waitDeadline struct {
	at      time.Time
	bounded bool
}

func (o *options) waitDeadline(ctx context.Context, ttl time.Duration) waitDeadline {
	if at, ok := ctx.Deadline(); ok {
		return waitDeadline{at: at, bounded: true}
	}
	wait := o.maxWait
	if wait == 0 {
		wait = ttl
	}
	return waitDeadline{at: time.Now().Add(wait)}
}

// next returns how long to wait after the attempt-th attempt failed with
// held, or the error that ends the call: held when the retry strategy gives
// up or the wait has no time left, joined with context.DeadlineExceeded when
// that time was ctx's.
func (d waitDeadline) next(o *options, attempt int, held error) (time.Duration, error) {
	wait, ok := o.retry.Backoff(attempt)
	if !ok {
		return 0, held
	}
	left := time.Until(d.at)
	switch {
	case left <= 0 && d.bounded:
		return 0, errors.Join(held, context.DeadlineExceeded)
	case left <= 0:
		return 0, held
	}
	return min(wait, left), nil
}

// nodeTimeout bounds one node's request for a lease of ttl.
func (c *Client) nodeTimeout(o *options, ttl time.Duration) time.Duration {
	switch {
	case o.nodeTimeout > 0:
		return o.nodeTimeout
	case c.quorum:
		return min(max(ttl/10, 50*time.Millisecond), ttl-o.drift(ttl))
	default:
		return ttl - o.drift(ttl)
	}
}

// Lock is one grant of a lock. Its methods are safe for concurrent use, and
// a nil *Lock answers ErrNotHeld.
type Lock struct {
	c     *Client
	key   string
	keys  keys
	token string
	arg   any // token, boxed once for the script calls
	fence int64
	opts  options

	validity
	released bool          // a Release succeeded: a second one is ErrNotHeld (guarded by mu)
	settled  chan struct{} // quorum: closed when the late nodes are settled (nil: none were late)
	handoffs int           // how many handoffs in a row led to this grant (handoff.go)
}

// validity is what a grant last confirmed, safe for concurrent use
// (shared by Lock and MultiLock).
type validity struct {
	mu    sync.Mutex
	ttl   time.Duration // last TTL asked for
	until time.Time     // validity confirmed by the last grant or refresh
}

func (s *validity) validUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.until
}

// confirmFrom records the validity of a lease of ttl asked for at start, or
// returns ErrGrantExpired when that validity has already passed: a grant or
// refresh is never confirmed late.
func (s *validity) confirmFrom(o *options, start time.Time, ttl time.Duration) error {
	until := o.validUntil(start, ttl)
	if !time.Now().Before(until) {
		return ErrGrantExpired
	}
	s.mu.Lock()
	s.until, s.ttl = until, ttl
	s.mu.Unlock()
	return nil
}

// lost records that the grant is known not to be held.
func (s *validity) lost() {
	s.mu.Lock()
	s.until = time.Time{}
	s.mu.Unlock()
}

func (s *validity) currentTTL() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ttl
}

// Key returns the key the caller asked for (without prefix or hash tag).
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Token returns the grant's random ownership token (128 bits from
// crypto/rand, base32): unique per grant, never reused.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Fence returns the grant's fencing token: greater than the fence of every
// earlier grant of this key, by any client. Pass it to the protected
// resource and have it reject writes with a fence below the highest it has
// seen (FencedSet does that on Redis). Zero for a nil Lock.
//
// Single mode: the first fence of a key is the server's clock in µs, each
// later one the last fence + 1 (a counter key, which expires 24 h after it
// was created). Since a key is granted far less often than once per µs, the
// counter stays below the clock, so a fence minted from the clock after
// Redis lost the counter (a restart without persistence, FLUSHALL,
// eviction, expiry) is still higher, as long as the server's clock did not
// step back by more than the time since the counter was seeded. Quorum
// mode: see NewQuorum.
func (l *Lock) Fence() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// ValidUntil returns the end of the validity last confirmed by Redis: the
// start of the Obtain or Refresh request that confirmed it, plus its TTL,
// less drift (TTL * drift factor + 2 ms). It carries Go's monotonic clock
// reading, so time.Until(l.ValidUntil()) is immune to wall-clock steps. The
// zero Time once the lock is known not to be held (released, or a
// Refresh/TTL answered ErrNotHeld).
func (l *Lock) ValidUntil() time.Time {
	if l == nil {
		return time.Time{}
	}
	return l.validUntil()
}

// TTL returns the lock's remaining time to live on Redis (in quorum mode the
// least over the nodes that hold it), or ErrNotHeld when this grant is no
// longer held. This is Redis' view; ValidUntil is the conservative local one.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, ErrNotHeld
	}
	var buf [1]reply
	replies := l.c.each(buf[:0], ctx, l.c.nodeTimeout(&l.opts, l.currentTTL()), op{kind: opTTL, l: l})
	least := int64(-1)
	ok, errs := tally(replies, func(r reply) bool {
		if r.a >= 0 && (least < 0 || r.a < least) {
			least = r.a
		}
		return r.a >= 0
	})
	if err := l.c.verdict(ok, errs); err != nil {
		if errors.Is(err, ErrNotHeld) {
			l.lost()
		}
		return 0, err
	}
	return time.Duration(least) * time.Millisecond, nil
}

// Refresh extends the lease to ttl from now, only if this grant still holds
// the lock (on a majority in quorum mode), and moves ValidUntil forward.
// ErrNotHeld when the grant is gone: a stale holder can never extend or
// shorten a newer holder's lock. A ttl below 1ms, or too short to leave
// validity after drift, is an error matching ErrInvalidArgument. If Redis
// cannot be reached, ValidUntil stays as it was and a later Refresh may
// still succeed.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return ErrNotHeld
	}
	if err := l.opts.checkTTL(ttl); err != nil {
		return err
	}
	start := time.Now()
	ms := ttl.Milliseconds()
	var buf [1]reply
	replies := l.c.each(buf[:0], ctx, l.c.nodeTimeout(&l.opts, ttl), op{kind: opRefresh, l: l, ms: ms})
	if err := l.c.verdict(tally(replies, isOne)); err != nil {
		if errors.Is(err, ErrNotHeld) {
			l.lost()
			if l.c.quorum {
				l.awaitLate()
				l.c.releaseAll(l) // undo the minority's extensions
			}
		}
		return err
	}
	return l.confirmFrom(&l.opts, start, ttl)
}

// Release gives the lock back, only if this grant still holds it; in quorum
// mode it asks every node (after the nodes that answered the grant late,
// waiting at most the release timeout) and succeeds when a majority held
// it. ErrNotHeld otherwise: a stale holder never deletes a newer holder's
// lock. While other callers of the same Client wait for the key (single
// mode, notified, not fair), the same call hands the lock to the
// longest-waiting one instead, up to 16 times in a row (see handoff.go).
// Release runs on a context detached from ctx (it ignores ctx's
// cancellation and deadline), bounded by the release timeout (default 3 s),
// so `defer l.Release(ctx)` cleans up after ctx was cancelled.
func (l *Lock) Release(_ context.Context) error {
	if l == nil {
		return ErrNotHeld
	}
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return ErrNotHeld
	}
	l.awaitLate()
	err, handed := l.c.handOff(l)
	if !handed {
		if err = l.c.verdict(l.c.releaseAll(l)); err == nil {
			l.c.wakeLocal(l)
		}
	}
	l.mu.Lock()
	l.until, l.released = time.Time{}, err == nil
	l.mu.Unlock()
	return err
}

// releaseAll deletes the grant on every node (compare-and-delete), each
// bounded by the release timeout on a context without cancellation.
func (c *Client) releaseAll(l *Lock) (released int, errs []error) {
	var buf [1]reply
	return tally(c.each(buf[:0], context.Background(), l.opts.releaseTimeout, op{kind: opRelease, l: l}), isOne)
}

// verdict turns per-node outcomes of an operation on a held grant into its
// result: nil on a majority, ErrNotHeld when enough nodes definitely said
// no, else the nodes' errors (joined with ErrNoQuorum in quorum mode).
func (c *Client) verdict(ok int, errs []error) error {
	switch {
	case ok >= c.majority():
		return nil
	case ok+len(errs) < c.majority():
		return ErrNotHeld
	default:
		return c.nodesErr(errs)
	}
}

func (c *Client) nodesErr(errs []error) error {
	if !c.quorum {
		return errs[0]
	}
	return errors.Join(append([]error{ErrNoQuorum}, errs...)...)
}

func (c *Client) majority() int { return len(c.nodes)/2 + 1 }

// request is what one Obtain call asks for. Each attempt makes a Lock of
// it with a token of its own, so that the background release of an earlier
// attempt's unknown outcome can never delete a later attempt's grant.
type request struct {
	c    *Client
	key  string
	keys keys
	opts options
	ttl  time.Duration
}

func (r *request) newLock() *Lock {
	token := rand.Text()
	return &Lock{c: r.c, key: r.key, keys: r.keys, token: token, arg: token, opts: r.opts}
}

// obtainOnce makes one attempt. It returns a valid grant, ErrNotObtained on
// contention, or another error; whatever it may have granted is released
// unless it returns a grant.
func (c *Client) obtainOnce(ctx context.Context, r *request) (*Lock, error) {
	switch {
	case r.opts.fair && c.quorum:
		return nil, invalid("WithFair is not supported in quorum mode")
	case !c.quorum:
		l := r.newLock()
		return l, c.obtainSingle(ctx, l, r.ttl)
	}
	return c.obtainQuorum(ctx, r)
}

func (c *Client) obtainSingle(ctx context.Context, l *Lock, ttl time.Duration) error {
	start := time.Now()
	ms := ttl.Milliseconds()
	kind := opObtain
	if l.opts.fair {
		kind = opFairObtain
	}
	r := c.callNode(ctx, c.nodeTimeout(&l.opts, ttl), 0, op{kind: kind, l: l, ms: ms})
	switch {
	case r.err != nil:
		// The script may have run (a reply lost to a timeout or a cut
		// connection): release whatever it may have granted.
		l.markQueued()
		c.background(func() { c.releaseAll(l) })
		return r.err
	case r.a == 0:
		l.markQueued()
		if r.b == -1 {
			return &NodeError{Node: 0, Err: errNoExpiry}
		}
		return heldFor(l.keys, r.b)
	case r.a != 1:
		return &NodeError{Node: 0, Err: fmt.Errorf("redislock: unexpected obtain reply %d %d", r.a, r.b)}
	}
	l.fence = r.b
	if err := l.confirmFrom(&l.opts, start, ttl); err != nil {
		c.releaseAll(l)
		return err
	}
	return nil
}

// errNoExpiry: the lock key holds a value that this library did not write
// (it writes every lock with a TTL); it would block the lock forever.
var errNoExpiry = errors.New("redislock: lock key holds a value without expiry, not written by redislock")
