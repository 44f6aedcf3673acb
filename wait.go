package redislock

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Notified waiting.
//
// A release publishes a wake-up on the lock's channel ("<prefix>{key}:wake")
// in the same script that deletes the lock, if an attempt found the lock
// held (the attempt marks the lock's value, atomically with finding it
// held; an uncontended release publishes nothing). A waiter whose attempt failed
// subscribes to that channel, waits for Redis to confirm the subscription,
// tries once more (a release between the failed attempt and the
// subscription is not missed), and then waits for the first of: a wake-up,
// its backoff, the remaining TTL the failed attempt reported (a lock that
// expires without release publishes nothing), or the end of ctx. A waiter
// that joins a channel this client already listens on skips the extra try:
// any release since its attempt woke another waiter of the client.
//
// All waiters of a Client share one subscription connection (a waker):
// a channel is subscribed when its first waiter arrives and unsubscribed
// after its last one leaves. Each release wakes one waiter per client (see
// waker.notify), not all, so a hot key does not cause a stampede of
// attempts. The waker owns two goroutines, a reader and a writer, started
// with the first subscription and stopped by Client.Close. Subscription
// commands are written by the writer goroutine, so a waiter never blocks on
// the network: if the connection is dead or slow, the confirmation does not
// come, and the waiter falls back to its backoff. The reader pings a silent
// connection every 2 s and replaces one that fails or stays silent, then
// subscribes again and wakes every waiter (a wake-up may have been lost).

// heldError is ErrNotObtained with what the failed attempt learned: the
// channel that will announce the release and the lock's remaining TTL.
type heldError struct {
	wake string        // the wake channel of the key that was held
	pttl time.Duration // remaining TTL of the holder's lease; < 0 if unknown
}

func (e *heldError) Error() string        { return ErrNotObtained.Error() }
func (e *heldError) Is(target error) bool { return target == ErrNotObtained }

// heldFor is the error of an attempt that found the lock held.
func heldFor(k keys, pttlMS int64) error {
	return &heldError{wake: k.wake(), pttl: time.Duration(pttlMS) * time.Millisecond}
}

// wakerHealthInterval is how long the waker's connection may stay silent
// before it is pinged; a ping unanswered for as long again marks the
// connection dead, and it is replaced.
const wakerHealthInterval = 2 * time.Second

// waitState is one Obtain call's waiting between attempts. Its zero value
// polls; with a Client in notified mode the first wait subscribes.
type waitState struct {
	c       *Client
	sharded bool
	ticket  string                          // fair mode: this Obtain call's place in the queue
	req     *request                        // Obtain: what a handoff grants (handoff.go); nil: no handoffs
	retry   func(ctx context.Context) error // one more attempt (the recheck)
	granted *Lock                           // Obtain: what the recheck obtained, or a handoff
	sub     *waitSub
	checked bool          // an attempt was made after sub was confirmed
	fairCap time.Duration // fair mode: waits are capped to renew the queue entry
	leave   func()        // run by stop (fair mode: leave the queue)
}

func (c *Client) newWaitState(o *options, retry func(ctx context.Context) error, leave func()) *waitState {
	w := &waitState{retry: retry, sharded: c.sharded(o), leave: leave}
	if o.ticket != nil {
		w.ticket = o.ticket.id
	}
	if o.fair {
		w.fairCap = o.queueTTL / 3
	}
	if o.notify {
		w.c = c
	}
	return w
}

// obtainWaiter is the wait state of one Client.Obtain call: its recheck
// keeps the Lock it obtains in granted.
func (c *Client) obtainWaiter(r request) *waitState {
	w := c.newWaitState(&r.opts, nil, c.fairLeave(&r.opts, r.keys))
	if !r.opts.fair {
		w.req = &r
	}
	w.retry = func(ctx context.Context) (err error) {
		w.granted, err = c.obtainOnce(ctx, &r)
		return err
	}
	return w
}

// errGranted: the recheck made right after subscribing obtained the lock, or
// a release handed it over.
var errGranted = errors.New("redislock: granted during wait")

// handedOver reports whether a release handed this waiter the lock, and
// keeps it in granted.
func (w *waitState) handedOver() bool {
	if w.sub != nil {
		w.granted = w.sub.take()
	}
	return w.granted != nil
}

// wait waits before the next attempt, after an attempt failed with held (an
// error matching ErrNotObtained). It returns nil to try again, errGranted if
// its own recheck obtained the lock or a release handed it over, or the
// error that ends Obtain (the context's, joined with ErrNotObtained, or the
// recheck's).
func (w *waitState) wait(ctx context.Context, wait time.Duration, held error) error {
	if w.handedOver() {
		return errGranted
	}
	if w.fairCap > 0 {
		wait = min(wait, w.fairCap)
	}
	var he *heldError
	if !errors.As(held, &he) || w.c == nil {
		return sleep(ctx, wait, nil)
	}
	if he.pttl >= 0 {
		// Expiry publishes nothing: wake just after it.
		wait = min(wait, he.pttl+time.Millisecond)
	}
	if w.sub == nil || w.sub.channel != he.wake {
		w.sub.stop()
		w.sub = w.c.subscribe(he.wake, w.ticket, w.req, w.sharded)
		if w.sub == nil {
			return sleep(ctx, wait, nil)
		}
		// When the channel was already subscribed for other waiters of
		// this client, a release since our attempt woke one of them, who
		// tries: no recheck is needed. (Not in fair mode: the release may
		// have been meant for this waiter, the queue's head.) A local
		// waker subscribes nothing, so it misses nothing.
		w.checked = w.sub.joined && w.fairCap == 0 || w.sub.w.local()
	} else if w.sub.resubscribed() {
		w.checked = false // a new connection: recheck once it confirms
	}
	if !w.checked {
		start := time.Now()
		if ok, err := w.sub.confirmed(ctx, wait); err != nil || !ok {
			// The context ended, or the wait did before Redis confirmed
			// the subscription: the next attempt is due anyway.
			return err
		}
		if w.handedOver() {
			return errGranted
		}
		// Subscribed: try again at once, so that a release that happened
		// before the subscription is not missed.
		w.checked = true
		err := w.retry(ctx)
		switch {
		case err == nil:
			return errGranted
		case !errors.Is(err, ErrNotObtained):
			return err
		}
		wait -= time.Since(start)
		if errors.As(err, &he) && he.pttl >= 0 {
			wait = min(wait, he.pttl+time.Millisecond)
		}
		if wait <= 0 {
			return nil
		}
	}
	if err := sleep(ctx, wait, w.sub.wake); err != nil {
		return err
	}
	if w.handedOver() {
		return errGranted
	}
	return nil
}

// waitRetry waits as wait does and reports its outcome as Obtain returns it:
// granted, or the error that ends the call (one that is not contention is
// joined with the ctx error that ended the wait), or neither: try again.
func (w *waitState) waitRetry(ctx context.Context, wait time.Duration, held error) (granted bool, err error) {
	switch err := w.wait(ctx, wait, held); {
	case err == errGranted:
		return true, nil
	case err != nil && !errors.Is(err, ErrNotObtained) && ctx.Err() != nil:
		return false, errors.Join(err, ctx.Err())
	default:
		return false, err
	}
}

// behind reports whether another caller of the Client has waited longer for
// the same key (notified, not fair, not sharded): the longest-waiting caller
// makes the attempts for all of them, the others wait for a release to wake
// them or hand them the lock.
func (w *waitState) behind() bool {
	if w == nil || w.sub == nil || w.fairCap > 0 || w.sharded {
		return false
	}
	s := w.sub
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	ch := s.w.chans[s.channel]
	return ch != nil && len(ch.waiters) > 0 && ch.waiters[0] != s
}

// stop leaves the subscription, if any, and the fair queue.
func (w *waitState) stop() {
	if w != nil {
		w.sub.stop()
		w.sub = nil
		if w.leave != nil {
			w.leave()
		}
	}
}

var timerPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// pooledTimer returns a timer from timerPool set to fire after d; give it
// back with putTimer.
func pooledTimer(d time.Duration) *time.Timer {
	t := timerPool.Get().(*time.Timer)
	t.Reset(d)
	return t
}

func putTimer(t *time.Timer) {
	t.Stop()
	timerPool.Put(t)
}

// sleep waits d, or until wake receives (nil channel: never) or ctx ends.
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	t := pooledTimer(d)
	defer putTimer(t)
	select {
	case <-ctx.Done():
		return errors.Join(ErrNotObtained, ctx.Err())
	case <-t.C:
	case <-wake:
	}
	return nil
}

// subscribe registers a waiter on channel with the client's waker, or
// returns nil when the client is closed.
func (c *Client) subscribe(channel, ticket string, req *request, sharded bool) *waitSub {
	w := c.wakerFor(channel, sharded)
	if w == nil {
		return nil
	}
	return w.add(channel, ticket, req)
}

// wakerFor returns the waker for channel, creating it on first use: one per
// Client, or in sharded mode on Redis Cluster one per master node (sharded
// channels live on the node that owns their slot).
func (c *Client) wakerFor(channel string, sharded bool) *waker {
	var rdb redis.UniversalClient // quorum mode: a local waker
	if !c.quorum {
		rdb = c.nodes[0]
	}
	if _, ring := rdb.(*redis.Ring); ring {
		// A Ring cannot open an empty subscription (it would panic), and
		// its shards hold different keys: waiters poll.
		return nil
	}
	addr := ""
	if sharded {
		addr = "sharded"
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			node, err := cc.MasterForKey(ctx, channel)
			cancel()
			if err != nil {
				return nil // no notification: the waiter polls
			}
			rdb, addr = node, "sharded "+node.Options().Addr
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if c.wakers == nil {
		c.wakers = make(map[string]*waker)
	}
	w := c.wakers[addr]
	if w == nil {
		w = newWaker(rdb, sharded)
		c.wakers[addr] = w
	}
	return w
}

// sharded reports whether waiting with o uses sharded pub/sub (never in
// quorum mode, which has no pub/sub: see waker).
func (c *Client) sharded(o *options) bool { return o.sharded && !c.quorum }

// localWaker returns the Client's waker for plain (not sharded) pub/sub,
// nil if no caller has waited yet: the one that handoffs and the in-Client
// queue work with.
func (c *Client) localWaker() *waker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wakers[""]
}

// closeWakers stops every waker of the client; called by Close.
func (c *Client) closeWakers() {
	c.mu.Lock()
	ws := c.wakers
	c.wakers = nil
	c.mu.Unlock()
	for _, w := range ws {
		w.close()
	}
}

// waker multiplexes the waiters of a Client over one subscription
// connection. A local waker (quorum mode: no node's pub/sub can announce a
// release of the majority) has no connection: it only queues the Client's
// waiters, and only the Client's own releases wake them.
type waker struct {
	rdb     redis.UniversalClient // nil: a local waker
	sharded bool

	mu      sync.Mutex
	ps      *redis.PubSub // replaced when its connection fails
	gen     int           // generation of ps
	chans   map[string]*wakeChan
	ops     []subOp // for the writer, in order
	started bool
	closed  bool

	signal chan struct{} // wakes the writer (buffered 1)
	stopCh chan struct{} // closed by close
	wg     sync.WaitGroup
}

type wakeChan struct {
	waiters []*waitSub    // in arrival order
	pending int           // (un)subscribe commands not yet confirmed
	ready   chan struct{} // closed when the subscription is confirmed
	isReady bool
}

type subOp struct {
	gen      int
	sub      bool // SUBSCRIBE, else UNSUBSCRIBE
	channels []string
}

// waitSub is one waiter's registration on a channel.
type waitSub struct {
	w       *waker
	channel string
	ticket  string        // fair mode: the waiter's queue entry; else ""
	req     *request      // what a handoff grants it; nil: none (handoff.go)
	claimed bool          // guarded by w.mu: a handoff to it is under way
	handed  *Lock         // guarded by w.mu: a lock handed to it, not yet taken
	gone    bool          // guarded by w.mu: stopped; a late handoff is released
	wake    chan struct{} // buffered 1: a wake-up, a reconnect, a handoff
	ready   chan struct{} // guarded by w.mu, replaced by reset
	renewed bool          // guarded by w.mu: reset subscribed again
	joined  bool          // the subscription was already confirmed when this waiter came
	once    sync.Once
}

func newWaker(rdb redis.UniversalClient, sharded bool) *waker {
	return &waker{
		rdb:     rdb,
		sharded: sharded,
		chans:   make(map[string]*wakeChan),
		signal:  make(chan struct{}, 1),
		stopCh:  make(chan struct{}),
	}
}

func (w *waker) local() bool { return w.rdb == nil }

// closedChan is the ready channel of a local waker's channels.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (w *waker) newPubSub() *redis.PubSub {
	if w.sharded {
		return w.rdb.SSubscribe(context.Background())
	}
	return w.rdb.Subscribe(context.Background())
}

// add registers a waiter on channel; its first waiter subscribes.
func (w *waker) add(channel, ticket string, req *request) *waitSub {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	if !w.started && !w.local() {
		w.started = true
		w.ps = w.newPubSub()
		w.wg.Add(2)
		go w.reader()
		go w.writer()
	}
	ch := w.chans[channel]
	if ch == nil {
		ch = &wakeChan{}
		w.chans[channel] = ch
	}
	switch {
	case len(ch.waiters) > 0:
	case w.local():
		ch.ready, ch.isReady = closedChan, true
	default:
		ch.pending++
		ch.ready, ch.isReady = make(chan struct{}), false
		w.enqueue(subOp{gen: w.gen, sub: true, channels: []string{channel}})
	}
	s := &waitSub{w: w, channel: channel, ticket: ticket, req: req, wake: make(chan struct{}, 1), ready: ch.ready, joined: ch.isReady}
	ch.waiters = append(ch.waiters, s)
	return s
}

// confirmed waits until the subscription is confirmed or a wake-up arrives
// (ok), d passed (not ok), or ctx ended (the error that ends Obtain).
func (s *waitSub) confirmed(ctx context.Context, d time.Duration) (ok bool, err error) {
	s.w.mu.Lock()
	ready := s.ready
	s.w.mu.Unlock()
	t := pooledTimer(d)
	defer putTimer(t)
	select {
	case <-ctx.Done():
		return false, errors.Join(ErrNotObtained, ctx.Err())
	case <-ready:
		return true, nil
	case <-s.wake:
		return true, nil
	case <-t.C:
		return false, nil
	}
}

// resubscribed reports (once) whether the channel was subscribed again on a
// new connection since the last call.
func (s *waitSub) resubscribed() bool {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	r := s.renewed
	s.renewed = false
	return r
}

// stop unregisters the waiter; the channel's last waiter unsubscribes. A
// lock handed to it and not taken is released. Safe on nil and more than
// once.
func (s *waitSub) stop() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		if l := s.leave(); l != nil {
			l.c.giveBack(l)
		}
	})
}

// leave does stop's work on the waker; it returns the lock handed to s, if
// any.
func (s *waitSub) leave() (handed *Lock) {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	s.gone = true
	handed, s.handed = s.handed, nil
	ch := w.chans[s.channel]
	if ch == nil {
		return handed
	}
	if i := slices.Index(ch.waiters, s); i >= 0 {
		ch.waiters = slices.Delete(ch.waiters, i, i+1)
	}
	if len(s.wake) > 0 && handed == nil {
		// Woken but leaving without trying: pass the wake-up on.
		wakeOne(ch.waiters, "")
	}
	if len(ch.waiters) > 0 {
		return handed
	}
	if w.closed || w.local() {
		delete(w.chans, s.channel)
		return handed
	}
	ch.pending++
	w.enqueue(subOp{gen: w.gen, channels: []string{s.channel}})
	return handed
}

func (w *waker) enqueue(op subOp) {
	if n := len(w.ops); n > 0 && w.ops[n-1].gen == op.gen && w.ops[n-1].sub == op.sub {
		w.ops[n-1].channels = append(w.ops[n-1].channels, op.channels...)
	} else {
		w.ops = append(w.ops, op)
	}
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// writer sends the queued (un)subscribe commands, in order, on the current
// connection. A failed write closes the connection; the reader replaces it.
func (w *waker) writer() {
	defer w.wg.Done()
	for {
		select {
		case <-w.stopCh:
			return
		case <-w.signal:
		}
		w.mu.Lock()
		ops, ps, gen := w.ops, w.ps, w.gen
		w.ops = nil
		w.mu.Unlock()
		for _, op := range ops {
			if op.gen != gen {
				continue // queued for a connection that was replaced
			}
			ctx, cancel := context.WithTimeout(context.Background(), wakerHealthInterval)
			var err error
			switch {
			case op.sub && w.sharded:
				err = ps.SSubscribe(ctx, op.channels...)
			case op.sub:
				err = ps.Subscribe(ctx, op.channels...)
			case w.sharded:
				err = ps.SUnsubscribe(ctx, op.channels...)
			default:
				err = ps.Unsubscribe(ctx, op.channels...)
			}
			cancel()
			if err != nil {
				_ = ps.Close() // the reader sees the error and replaces ps
				break
			}
		}
	}
}

// reader receives confirmations and wake-ups, pings a silent connection,
// and replaces a failed one.
func (w *waker) reader() {
	defer w.wg.Done()
	pinged := false
	failures := 0
	for {
		w.mu.Lock()
		ps := w.ps
		w.mu.Unlock()
		msg, err := ps.ReceiveTimeout(context.Background(), wakerHealthInterval)
		select {
		case <-w.stopCh:
			return
		default:
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				ctx, cancel := context.WithTimeout(context.Background(), wakerHealthInterval)
				err = ps.Ping(ctx)
				cancel()
				if err == nil {
					pinged = true
					continue
				}
			}
			// A dead, silent or closed connection: start over on a new one,
			// after a pause that grows with repeated failures.
			pinged = false
			w.reset(ps)
			failures++
			pause := min(time.Duration(failures)*100*time.Millisecond, time.Second)
			select {
			case <-w.stopCh:
				return
			case <-time.After(pause):
			}
			continue
		}
		pinged, failures = false, 0
		switch m := msg.(type) {
		case *redis.Subscription:
			w.confirm(m)
		case *redis.Message:
			w.notify(m.Channel, m.Payload)
		}
	}
}

func (w *waker) confirm(m *redis.Subscription) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := w.chans[m.Channel]
	if ch == nil || ch.pending == 0 {
		return
	}
	ch.pending--
	if ch.pending > 0 {
		return
	}
	if len(ch.waiters) == 0 {
		delete(w.chans, m.Channel)
		return
	}
	if !ch.isReady {
		ch.isReady = true
		close(ch.ready)
	}
}

// notify handles a release on channel. It wakes one waiter, not all: the
// one whose ticket the release named (the head of a fair queue), else the
// longest-waiting one that is not already awake. Every client wakes one
// waiter per release, so a release costs one attempt per client instead of
// one per waiter. A woken waiter that fails waits for the next release; one
// that leaves without trying passes its wake-up on (waitSub.stop).
func (w *waker) notify(channel, payload string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch := w.chans[channel]; ch != nil {
		wakeOne(ch.waiters, payload)
	}
}

func wakeOne(waiters []*waitSub, ticket string) {
	if ticket != "" {
		for _, s := range waiters {
			if s.ticket == ticket {
				s.signal()
				return
			}
		}
	}
	for _, s := range waiters {
		if len(s.wake) == 0 {
			s.signal()
			return
		}
	}
}

func (s *waitSub) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// reset replaces a failed connection old with a new one, subscribed to every
// channel that has waiters, and wakes all waiters: a wake-up may have been
// lost.
func (w *waker) reset(old *redis.PubSub) {
	_ = old.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.ps != old {
		return
	}
	w.gen++
	w.ps = w.newPubSub()
	var channels []string
	for name, ch := range w.chans {
		if len(ch.waiters) == 0 {
			delete(w.chans, name)
			continue
		}
		channels = append(channels, name)
		ch.pending = 1
		ch.ready, ch.isReady = make(chan struct{}), false
		for _, s := range ch.waiters {
			s.ready, s.renewed = ch.ready, true
			s.signal()
		}
	}
	if len(channels) > 0 {
		w.enqueue(subOp{gen: w.gen, sub: true, channels: channels})
	}
}

// close stops the goroutines and closes the connection. Waiters still
// registered fall back to their backoff.
func (w *waker) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	ps := w.ps
	w.mu.Unlock()
	close(w.stopCh)
	if ps != nil {
		_ = ps.Close()
	}
	w.wg.Wait()
	w.mu.Lock()
	if w.ps != nil && w.ps != ps {
		_ = w.ps.Close()
	}
	w.mu.Unlock()
}

// queueBehindLocalWaiters reports whether a new Obtain with a retry
// strategy should skip its first attempt because other callers of this
// Client are waiting, notified, for the same key: waking the longest-waiting
// one per release then grants in arrival order within the Client, and a
// caller that just released cannot re-take the lock ahead of them.
func (c *Client) queueBehindLocalWaiters(o *options, k keys) bool {
	if !o.notify || o.fair || c.sharded(o) {
		return false
	}
	if _, ok := o.retry.Backoff(1); !ok {
		return false // a single attempt must try
	}
	w := c.localWaker()
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := w.chans[k.wake()]
	return ch != nil && ch.isReady && len(ch.waiters) > 0
}
