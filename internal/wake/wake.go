// Package wake multiplexes the waiters of one redislock client over one
// pub/sub connection: a channel is subscribed when its first waiter
// arrives and unsubscribed after its last one leaves; a release's message
// wakes one waiter per client, not all, so that a hot key does not cause a
// stampede of attempts. It also keeps the waiters of each channel in
// arrival order, which the client's in-process queue and handoffs use. It
// knows no lock: what a handoff delivers is a type parameter.
//
// A Waker owns two goroutines, a reader and a writer, started with the
// first subscription and stopped by Close. Subscription commands are written
// by the writer, so a waiter never blocks on the network: when the
// connection is dead or slow, the confirmation does not come, and the waiter
// falls back to its backoff. The reader pings a silent connection every
// HealthInterval and replaces one that fails or stays silent, then
// subscribes again and wakes every waiter (a message may have been lost).
package wake

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/lease"
)

// HealthInterval is how long the connection may stay silent before it is
// pinged; a ping unanswered for as long again marks it dead, and it is
// replaced.
const HealthInterval = 2 * time.Second

// Waker multiplexes waiters of type Sub[R, G] over one subscription
// connection. R is what a waiter asks a handoff for, G what a handoff
// delivers. A local Waker (NewLocal) has no connection: it only queues
// waiters, and only the client's own Notify calls wake them.
type Waker[R, G any] struct {
	rdb     redis.UniversalClient // nil: local
	sharded bool
	named   bool        // a message wakes the waiters it names, no other (NewNamed)
	onReset func(error) // told when the connection is replaced (may be nil)
	clock   lease.Clock // times Sub.Confirmed and the pause before a reconnect

	mu      sync.Mutex
	ps      *redis.PubSub // guarded by mu; replaced when its connection fails
	gen     int           // guarded by mu: generation of ps
	chans   map[string]*channel[R, G]
	ops     []subOp // guarded by mu: for the writer, in order
	started bool    // guarded by mu
	closed  bool    // guarded by mu

	signal chan struct{} // wakes the writer (buffered 1)
	stopCh chan struct{} // closed by Close
	wg     sync.WaitGroup
}

// channel is one subscribed channel and its waiters.
type channel[R, G any] struct {
	waiters []*Sub[R, G]  // in arrival order
	pending int           // (un)subscribe commands not yet confirmed
	ready   chan struct{} // closed when the subscription is confirmed
	isReady bool
}

type subOp struct {
	gen      int
	sub      bool // SUBSCRIBE, else UNSUBSCRIBE
	channels []string
}

// New returns a Waker on rdb's pub/sub (sharded: SSUBSCRIBE). onReset, if
// not nil, is told the error that made the reader replace the connection.
func New[R, G any](rdb redis.UniversalClient, sharded bool, onReset func(error)) *Waker[R, G] {
	w := NewLocal[R, G]()
	w.rdb, w.sharded, w.onReset = rdb, sharded, onReset
	return w
}

// NewNamed returns a Waker on rdb's pub/sub (not sharded) whose messages
// name the waiters they wake: a payload is a list of tickets separated by
// spaces, and it wakes the waiters of those tickets and no other, nor does
// a waiter that leaves pass its wake-up on. A semaphore's release, which
// frees slots for the waiters at the head of its queue wherever they are,
// wakes that way.
func NewNamed[R, G any](rdb redis.UniversalClient, onReset func(error)) *Waker[R, G] {
	w := New[R, G](rdb, false, onReset)
	w.named = true
	return w
}

// NewLocal returns a Waker without connection.
func NewLocal[R, G any]() *Waker[R, G] {
	return &Waker[R, G]{
		clock:  realClock{},
		chans:  make(map[string]*channel[R, G]),
		signal: make(chan struct{}, 1),
		stopCh: make(chan struct{}),
	}
}

// realClock is the Waker's clock unless a test sets another (SetClock).
type realClock struct{}

func (realClock) Now() time.Time                                  { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) lease.Timer { return time.AfterFunc(d, f) }

// Local reports whether the Waker has no connection.
func (w *Waker[R, G]) Local() bool { return w.rdb == nil }

// closedChan is the ready channel of a local Waker's channels.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (w *Waker[R, G]) newPubSub() *redis.PubSub {
	if w.sharded {
		return w.rdb.SSubscribe(context.Background())
	}
	return w.rdb.Subscribe(context.Background())
}

// Add registers a waiter on channel (its first waiter subscribes): ticket
// is its fair-queue entry ("" for none), req what a handoff to it grants
// (handoffs false: it takes none). It returns nil after Close.
func (w *Waker[R, G]) Add(channelName, ticket string, req R, handoffs bool) *Sub[R, G] {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	if !w.started && !w.Local() {
		w.started = true
		w.ps = w.newPubSub()
		w.wg.Add(2)
		go w.reader()
		go w.writer()
	}
	ch := w.chans[channelName]
	if ch == nil {
		ch = &channel[R, G]{}
		w.chans[channelName] = ch
	}
	switch {
	case len(ch.waiters) > 0:
	case w.Local():
		ch.ready, ch.isReady = closedChan, true
	default:
		ch.pending++
		ch.ready, ch.isReady = make(chan struct{}), false
		w.enqueue(subOp{gen: w.gen, sub: true, channels: []string{channelName}})
	}
	s := &Sub[R, G]{w: w, channel: channelName, ticket: ticket, req: req, handoffs: handoffs,
		wake: make(chan struct{}, 1), ready: ch.ready, joined: ch.isReady}
	ch.waiters = append(ch.waiters, s)
	return s
}

// Waiting reports how many waiters channel has and whether its
// subscription is confirmed.
func (w *Waker[R, G]) Waiting(channelName string) (n int, ready bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch := w.chans[channelName]; ch != nil {
		return len(ch.waiters), ch.isReady
	}
	return 0, false
}

func (w *Waker[R, G]) enqueue(op subOp) {
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
func (w *Waker[R, G]) writer() {
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
			ctx, cancel := context.WithTimeout(context.Background(), HealthInterval)
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

// reader receives confirmations and messages, pings a silent connection,
// and replaces a failed one.
func (w *Waker[R, G]) reader() {
	defer w.wg.Done()
	pinged := false
	failures := 0
	for {
		w.mu.Lock()
		ps := w.ps
		w.mu.Unlock()
		msg, err := ps.ReceiveTimeout(context.Background(), HealthInterval)
		select {
		case <-w.stopCh:
			return
		default:
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				ctx, cancel := context.WithTimeout(context.Background(), HealthInterval)
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
			w.reset(ps, err)
			failures++
			paused := make(chan struct{})
			pause := w.clock.AfterFunc(min(time.Duration(failures)*100*time.Millisecond, time.Second), func() { close(paused) })
			select {
			case <-w.stopCh:
				pause.Stop()
				return
			case <-paused:
			}
			continue
		}
		pinged, failures = false, 0
		switch m := msg.(type) {
		case *redis.Subscription:
			w.confirm(m.Channel)
		case *redis.Message:
			w.Notify(m.Channel, m.Payload)
		}
	}
}

// confirm handles the confirmation of a (un)subscribe command.
func (w *Waker[R, G]) confirm(channelName string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := w.chans[channelName]
	if ch == nil || ch.pending == 0 {
		return
	}
	ch.pending--
	if ch.pending > 0 {
		return
	}
	if len(ch.waiters) == 0 {
		delete(w.chans, channelName)
		return
	}
	if !ch.isReady {
		ch.isReady = true
		close(ch.ready)
	}
}

// Notify handles a release on channel. It wakes one waiter, not all: the
// one whose ticket the release named (the head of a fair queue), else the
// longest-waiting one that is not already awake. A woken waiter that fails
// waits for the next release; one that leaves without trying passes its
// wake-up on (Sub.Stop). A named Waker (NewNamed) wakes the waiters whose
// tickets payload lists instead, and only them.
func (w *Waker[R, G]) Notify(channelName, payload string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := w.chans[channelName]
	switch {
	case ch == nil:
	case w.named:
		wakeNamed(ch.waiters, payload)
	default:
		wakeOne(ch.waiters, payload)
	}
}

func wakeNamed[R, G any](waiters []*Sub[R, G], tickets string) {
	for ticket := range strings.FieldsSeq(tickets) {
		for _, s := range waiters {
			if s.ticket == ticket {
				s.signal()
			}
		}
	}
}

func wakeOne[R, G any](waiters []*Sub[R, G], ticket string) {
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

// reset replaces a failed connection old with a new one, subscribed to every
// channel that has waiters, and wakes all waiters: a message may have been
// lost.
func (w *Waker[R, G]) reset(old *redis.PubSub, cause error) {
	_ = old.Close()
	if w.renew(old) && w.onReset != nil {
		w.onReset(cause)
	}
}

// renew does reset's work under the lock; false when old was replaced or
// closed already.
func (w *Waker[R, G]) renew(old *redis.PubSub) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.ps != old {
		return false
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
	return true
}

// Close stops the goroutines and closes the connection. Waiters still
// registered fall back to their backoff.
func (w *Waker[R, G]) Close() {
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
