package wake

import (
	"context"
	"slices"
	"sync"
	"time"
)

// handoff is where a waiter is in taking a handoff: idle → claimed (a
// release is handing it a grant) → handed (the grant waits for it) → idle
// again once it takes the grant; gone once it left, when a grant still on
// its way is the releaser's to give back.
type handoff uint8

const (
	idle handoff = iota
	claimed
	handed
	gone
)

// Sub is one waiter's registration on a channel.
type Sub[R, G any] struct {
	w        *Waker[R, G]
	channel  string
	ticket   string // the waiter's fair-queue entry, or ""
	req      R      // what a handoff to it grants
	handoffs bool   // it takes handoffs
	joined   bool   // the subscription was already confirmed when it came

	wake chan struct{} // buffered 1: a message, a reconnect, a handoff
	once sync.Once

	// guarded by w.mu
	ready   chan struct{} // replaced by reset
	renewed bool          // reset subscribed again since Resubscribed
	state   handoff
	grant   G // state handed: the grant handed to it
}

// Channel returns the channel the waiter waits on.
func (s *Sub[R, G]) Channel() string { return s.channel }

// Wake receives when the waiter is woken: a release, a reconnect, a handoff.
func (s *Sub[R, G]) Wake() <-chan struct{} { return s.wake }

// Joined reports whether the channel's subscription was already confirmed
// when the waiter came (another waiter of the client heard every release
// since).
func (s *Sub[R, G]) Joined() bool { return s.joined }

// Local reports whether the waiter's Waker is local (NewLocal).
func (s *Sub[R, G]) Local() bool { return s.w.Local() }

// Confirmed waits until the subscription is confirmed or a wake-up arrives
// (ok), d passes on the Waker's clock (not ok), or ctx ends (its error).
func (s *Sub[R, G]) Confirmed(ctx context.Context, d time.Duration) (ok bool, err error) {
	s.w.mu.Lock()
	ready := s.ready
	s.w.mu.Unlock()
	expired := make(chan struct{})
	t := s.w.clock.AfterFunc(d, func() { close(expired) })
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-ready:
		return true, nil
	case <-s.wake:
		return true, nil
	case <-expired:
		return false, nil
	}
}

// Resubscribed reports (once) whether the channel was subscribed again on a
// new connection since the last call.
func (s *Sub[R, G]) Resubscribed() bool {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	r := s.renewed
	s.renewed = false
	return r
}

// Behind reports whether another waiter of the channel came before this
// one and is still waiting.
func (s *Sub[R, G]) Behind() bool {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	ch := s.w.chans[s.channel]
	return ch != nil && len(ch.waiters) > 0 && ch.waiters[0] != s
}

// Take returns the grant handed to the waiter, if any.
func (s *Sub[R, G]) Take() (g G, ok bool) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if s.state != handed {
		return g, false
	}
	g, s.grant, s.state = s.grant, *new(G), idle
	return g, true
}

// Stop unregisters the waiter; the channel's last waiter unsubscribes. It
// returns a grant handed to it and not taken, which the caller must give
// back. Safe more than once (later calls return nothing).
func (s *Sub[R, G]) Stop() (handedGrant G, ok bool) {
	s.once.Do(func() { handedGrant, ok = s.leave() })
	return handedGrant, ok
}

func (s *Sub[R, G]) leave() (g G, ok bool) {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.state == handed {
		g, ok = s.grant, true
	}
	s.state, s.grant = gone, *new(G)
	ch := w.chans[s.channel]
	if ch == nil {
		return g, ok
	}
	if i := slices.Index(ch.waiters, s); i >= 0 {
		ch.waiters = slices.Delete(ch.waiters, i, i+1)
	}
	if len(s.wake) > 0 && !ok && !w.named {
		// Woken but leaving without trying: pass the wake-up on.
		wakeOne(ch.waiters, "")
	}
	switch {
	case len(ch.waiters) > 0:
	case w.closed || w.Local():
		delete(w.chans, s.channel)
	default:
		ch.pending++
		w.enqueue(subOp{gen: w.gen, channels: []string{s.channel}})
	}
	return g, ok
}

func (s *Sub[R, G]) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Claim picks the longest-waiting waiter on channel that takes handoffs and
// is not taking one already, marks it claimed and returns it with what it
// asks for; nil when there is none.
func (w *Waker[R, G]) Claim(channelName string) (*Sub[R, G], R) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch := w.chans[channelName]; ch != nil {
		for _, s := range ch.waiters {
			if s.handoffs && s.state == idle {
				s.state = claimed
				return s, s.req
			}
		}
	}
	var none R
	return nil, none
}

// Deliver ends s's claim. With ok, it hands g to s and wakes it, unless s
// has left: then it reports false, and the caller must give g back.
func (w *Waker[R, G]) Deliver(s *Sub[R, G], g G, ok bool) (taken bool) {
	w.mu.Lock()
	if s.state == claimed {
		s.state = idle
		if ok {
			s.state, s.grant, taken = handed, g, true
		}
	}
	w.mu.Unlock()
	if taken {
		s.signal()
	}
	return taken
}
