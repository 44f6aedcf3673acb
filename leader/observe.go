package leader

import (
	"context"
	"errors"
)

// Observe returns a channel of the election's leadership changes: who leads
// when Observe starts, then every new term, and a zero Info (Term 0) when
// nobody leads. The leaders' terms on the channel never decrease; a
// vacancy may come between any two of them (a poll that falls between one
// term's end and the next one's start sees nobody leading), so compare
// terms of non-zero values only. The channel is closed
// when ctx ends, by the goroutine that feeds it; cancel ctx to stop it.
//
// It asks the backend every observe interval (WithObserveInterval) and at
// once when this Election wins or resigns, so a term shorter than the
// interval may go unseen; each value sent is the newest one seen (a slow
// reader misses intermediate changes, never the latest). While the
// backend cannot be reached Observe retries at the interval and sends
// nothing.
func (e *Election) Observe(ctx context.Context) <-chan Info {
	ch := make(chan Info)
	go e.observe(ctx, ch)
	return ch
}

func (e *Election) observe(ctx context.Context, ch chan<- Info) {
	defer close(ch)
	var (
		pending  *Info // the newest change, not yet received
		sent     bool  // a first value was seen
		vacant   bool  // the last value seen was a vacancy
		maxTerm  int64 // the highest term seen
		tick     = make(chan struct{}, 1)
		interval = e.o.observe
	)
	for {
		e.mu.Lock()
		changed := e.changed
		e.mu.Unlock()
		info, err := e.Leader(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrNoLeader):
			if !sent || !vacant {
				pending, sent, vacant = &Info{}, true, true
			}
		case err != nil: // unreachable: try again at the next tick
		case info.Term > maxTerm, vacant && info.Term == maxTerm:
			maxTerm = info.Term
			pending, sent, vacant = &info, true, false
		}
		timer := e.o.clock.AfterFunc(interval, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
	wait:
		for {
			var out chan<- Info
			var v Info
			if pending != nil {
				out, v = ch, *pending
			}
			select {
			case out <- v:
				pending = nil
			case <-tick:
				break wait
			case <-changed:
				break wait
			case <-ctx.Done():
				timer.Stop()
				return
			}
		}
		timer.Stop()
	}
}
