package dedup

import (
	"context"
	"errors"

	"github.com/redislock-go/redislock/observe"

	"github.com/redislock-go/redislock/lease"
)

// WithObserver adds o, an observe.JobObserver, to the Group's observers:
// it is told how every Do ended (ran, duplicate, in progress, error), as
// the metric adapters (extra/redislockprom, extra/redislockotel) count
// them. The option may be given more than once; a value that is no
// JobObserver is an invalid option. Default: none, and a Group without
// observers builds no event.
func WithObserver(o observe.Observer) Option {
	return func(opts *options) {
		x, ok := o.(observe.JobObserver)
		if !ok {
			opts.fail(lease.Invalid("%T is no observe.JobObserver", o))
			return
		}
		opts.observers = append(opts.observers, x)
	}
}

// jobOutcome is how a Do that returned r and err ended.
func jobOutcome(r Result, err error) observe.JobOutcome {
	switch {
	case r.Ran:
		return observe.JobRan
	case err == nil, errors.Is(err, ErrFailed):
		return observe.JobDuplicate // the recorded outcome: a value or a failure
	case errors.Is(err, ErrInProgress):
		return observe.JobInProgress
	}
	return observe.JobFailed
}

// observed runs do and tells the observers how it ended.
func (g *Group) observed(ctx context.Context, id string, do func() (Result, error)) (Result, error) {
	start := g.o.clock.Now()
	r, err := do()
	e := observe.JobEvent{ID: id, Outcome: jobOutcome(r, err), Fence: r.Fence, Duration: g.o.clock.Now().Sub(start), Err: err}
	for _, x := range g.o.observers {
		x.JobDone(ctx, e)
	}
	return r, err
}
