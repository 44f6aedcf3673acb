package semaphore

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Wake-ups.
//
// A release (and a grant that leaves slots free, and the purge of ended
// leases) publishes, on the semaphore's wake channel, the tickets of the
// waiters at the head of the queue that the free slots await. The
// Semaphore subscribes to the channel when its first waiter needs it and
// keeps the subscription until Close; its reader goroutine wakes the
// local waiters the message names. After the connection is replaced (a
// new subscription confirmation), every local waiter is woken, since a
// wake-up may have been lost meanwhile. Waiters also wake at the end of
// the earliest lease (an expiry publishes nothing) and every third of the
// queue TTL, so a lost wake-up costs at most that.

// register gives the Acquire call of ticket a channel to be woken on.
func (s *Semaphore) register(ticket string) chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.waiters[ticket] = ch
	s.mu.Unlock()
	return ch
}

func (s *Semaphore) unregister(ticket string) {
	s.mu.Lock()
	delete(s.waiters, ticket)
	s.mu.Unlock()
}

// notify wakes the waiter of each ticket in payload that is this
// Semaphore's, or every waiter when payload is "".
func (s *Semaphore) notify(payload string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	poke := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default: // already woken
		}
	}
	if payload == "" {
		for _, ch := range s.waiters {
			poke(ch)
		}
		return
	}
	for _, ticket := range strings.Fields(payload) {
		if ch, ok := s.waiters[ticket]; ok {
			poke(ch)
		}
	}
}

// subscribe makes sure the wake channel is subscribed and confirmed. An
// error (Redis unreachable, the confirmation late) leaves the waiters to
// their timers.
func (s *Semaphore) subscribe(ctx context.Context) error {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	if s.sub != nil {
		return nil
	}
	select {
	case <-s.closed:
		return redis.ErrClosed
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
	defer cancel()
	ps := s.rdb.Subscribe(ctx, s.wake)
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return err
	}
	s.sub = ps
	ch := ps.ChannelWithSubscriptions()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for m := range ch {
			switch m := m.(type) {
			case *redis.Message:
				s.notify(m.Payload)
			case *redis.Subscription: // resubscribed on a new connection
				s.notify("")
			}
		}
	}()
	return nil
}
