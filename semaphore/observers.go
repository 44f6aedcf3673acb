package semaphore

import (
	"context"
	"time"

	"github.com/redislock-go/redislock/observe"

	"github.com/redislock-go/redislock/lease"
)

// WithObserver adds o to the Semaphore's observers: a value that
// implements one or more of observe.AcquireObserver (Acquire and
// TryAcquire calls), observe.QueueObserver (calls that wait) and
// observe.PermitObserver (renewals and releases), such as the metric
// adapters (extra/redislockprom, extra/redislockotel). The option may be
// given more than once; a value that implements none of them is an invalid
// option. Default: none, and a Semaphore without observers builds no
// event.
func WithObserver(o observe.Observer) Option {
	return func(opts *options) {
		switch o.(type) {
		case observe.AcquireObserver, observe.QueueObserver, observe.PermitObserver:
			opts.observers = append(opts.observers, o)
		default:
			opts.fail(lease.Invalid("semaphore: %T implements none of the semaphore's observer interfaces", o))
		}
	}
}

// observers dispatches a Semaphore's events; nil without observers.
type observers struct {
	acquire []observe.AcquireObserver
	queue   []observe.QueueObserver
	permit  []observe.PermitObserver
}

func newObservers(list []observe.Observer) *observers {
	if len(list) == 0 {
		return nil
	}
	return &observers{
		acquire: observe.Select[observe.AcquireObserver](list),
		queue:   observe.Select[observe.QueueObserver](list),
		permit:  observe.Select[observe.PermitObserver](list),
	}
}

func (o *observers) acquireStart(ctx context.Context, e observe.AcquireStartEvent) context.Context {
	for _, x := range o.acquire {
		ctx = x.AcquireStart(ctx, e)
	}
	return ctx
}

func (o *observers) acquireDone(ctx context.Context, e observe.AcquireDoneEvent) {
	for _, x := range o.acquire {
		x.AcquireDone(ctx, e)
	}
}

func (o *observers) queued(ctx context.Context, e observe.QueueEvent) {
	for _, x := range o.queue {
		x.Queued(ctx, e)
	}
}

func (o *observers) refreshed(ctx context.Context, p *Permit, ttl time.Duration, err error) {
	for _, x := range o.permit {
		x.PermitRefreshed(ctx, p.event(ttl, err))
	}
}

func (o *observers) released(ctx context.Context, p *Permit, err error) {
	for _, x := range o.permit {
		x.PermitReleased(ctx, p.event(0, err))
	}
}

func (p *Permit) event(ttl time.Duration, err error) observe.PermitEvent {
	return observe.PermitEvent{Semaphore: p.s.name, Slot: p.slot, Fence: p.fence, TTL: ttl, Held: time.Since(p.start), Err: err}
}
