package leader

import (
	"context"

	"github.com/redislock-go/redislock/observe"

	"github.com/redislock-go/redislock/lease"
)

// WithObserver adds o, an observe.TermObserver, to the Election's
// observers: it is told of every term this candidate wins and of how each
// ends (resigned or lost), as the metric adapters (extra/redislockprom,
// extra/redislockotel) count them. The option may be given more than once;
// a value that is no TermObserver is an invalid option. Default: none, and
// an Election without observers builds no event.
func WithObserver(o observe.Observer) Option {
	return func(opts *options) {
		x, ok := o.(observe.TermObserver)
		if !ok {
			opts.fail(lease.Invalid("%T is no observe.TermObserver", o))
			return
		}
		opts.observers = append(opts.observers, x)
	}
}

// observe tells the observers that t began and arranges for them to
// be told when it ends: when its context is cancelled, whatever cancels it
// (Resign, the watchdog, a renewal that found the lock gone). t.release
// waits for that report, so Resign returns after it.
func (t *Term) observe(ctx context.Context) {
	obs := t.e.o.observers
	if len(obs) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	e := observe.TermEvent{Election: t.e.name, Identity: t.e.o.holder, Term: t.Fence()}
	for _, x := range obs {
		x.TermStarted(ctx, e)
	}
	t.reported = make(chan struct{})
	context.AfterFunc(t.ctx, func() {
		defer close(t.reported)
		e.Held, e.Cause = t.e.o.clock.Now().Sub(t.start), context.Cause(t.ctx)
		for _, x := range obs {
			x.TermEnded(ctx, e)
		}
	})
}
