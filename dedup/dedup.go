package dedup

import (
	"context"
	"errors"
	"time"

	"github.com/redislock-go/redislock/lease"
)

// Group runs jobs at most once per id across every worker that uses the
// same backend and prefix. Its methods are safe for concurrent use.
type Group struct {
	locker lease.Locker
	store  lease.Store
	o      options
}

// A Job is the work run for an id: under the job's lock, with a ctx that
// is cancelled if the lock is lost (or Do's ctx ends), and the lock's fence
// to send with every write the job makes. What it returns is recorded as
// the job's outcome, by the scope.
type Job func(ctx context.Context, fence int64) ([]byte, error)

// Result is the outcome of a job, from this call's run or an earlier one.
type Result struct {
	// Value is what the job returned: in this call (Ran), or in the
	// earlier run whose outcome was recorded.
	Value []byte
	// Fence is the fence of the run that produced Value.
	Fence int64
	// Ran is true when this call ran the job.
	Ran bool
}

// New returns a Group that locks jobs on locker and records their outcomes
// in store (for redislock: client.Locker() and client.Store(); the same
// leasetest.Memory for both in tests). It fails with an error matching
// lease.ErrInvalidArgument on a nil locker or store, or an invalid option.
func New(locker lease.Locker, store lease.Store, opts ...Option) (*Group, error) {
	if locker == nil {
		return nil, lease.Invalid("nil Locker")
	}
	if store == nil {
		return nil, lease.Invalid("nil Store")
	}
	o, err := apply(opts)
	if err != nil {
		return nil, err
	}
	return &Group{locker: locker, store: store, o: o}, nil
}

// Do runs job for id unless its outcome is recorded or another worker runs
// it now:
//
//   - A recorded outcome is returned without a run: the earlier run's
//     Value (Ran false), or, for a recorded failure, a *FailedError.
//   - While another worker runs it, Do returns an *InProgressError
//     (matching ErrInProgress) whose RetryAfter says when to deliver the
//     job again, or with WithRetry waits for that run and returns its
//     outcome.
//   - Otherwise Do takes the job's lock, looks for a recorded outcome once
//     more, and runs job, renewing the lease while it runs. When job
//     returns, its outcome is recorded (by the scope) with the lock's
//     fence, and the lock is given back. Do returns job's value (Ran true)
//     and error.
//
// If the lock is lost while job runs (its worker was paused past the
// lease, the backend lost it), job's ctx is cancelled and the error
// matches lease.ErrLockLost; another worker may run the job meanwhile, and
// only fences refused by the resources it writes to keep the stale run's
// late writes out. The outcome is still recorded, unless a newer run
// recorded one first (then the error also matches lease.ErrStaleFence).
// A run whose outcome could not be recorded returns the Store's error: its
// id may run again.
//
// If job panics, the lock is given back, nothing is recorded and the panic
// goes on. A worker that crashes while job runs records nothing; its id
// can run again once the lease ends. An empty id or a nil job is an error
// matching lease.ErrInvalidArgument; a backend that cannot be reached
// returns its error.
func (g *Group) Do(ctx context.Context, id string, job Job) (Result, error) {
	switch {
	case ctx == nil:
		return Result{}, lease.Invalid("nil context")
	case id == "":
		return Result{}, lease.Invalid("empty job id")
	case job == nil:
		return Result{}, lease.Invalid("nil job")
	}
	if len(g.o.observers) > 0 {
		return g.observed(ctx, id, func() (Result, error) { return g.do(ctx, id, job) })
	}
	return g.do(ctx, id, job)
}

// do is Do on valid arguments.
func (g *Group) do(ctx context.Context, id string, job Job) (Result, error) {
	key := lease.Key(g.o.prefix, id)
	if r, found, err := g.recorded(ctx, id, key); found || err != nil {
		return r, err
	}
	l, r, found, err := g.obtain(ctx, id, key)
	if found || err != nil {
		return r, err
	}
	// The run that held the lock before may have recorded its outcome
	// after the first look.
	if r, found, err := g.recorded(ctx, id, key); found || err != nil {
		_ = l.Release(ctx)
		return r, err
	}
	return g.run(ctx, key, l, job)
}

// recorded returns the outcome recorded for the job, if any.
func (g *Group) recorded(ctx context.Context, id, key string) (r Result, found bool, err error) {
	rec, err := g.store.Get(ctx, key)
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return Result{}, false, nil
	case err != nil:
		return Result{}, false, err
	}
	r, err = outcome(id, rec)
	return r, true, err
}

// obtain takes the job's lock. Without it, it returns an outcome recorded
// while it waited (found), or why not: an *InProgressError, ctx's end, the
// backend's error.
func (g *Group) obtain(ctx context.Context, id, key string) (l lease.Lock, r Result, found bool, err error) {
	opts := []lease.Option{lease.WithRetry(lease.NoRetry())}
	if g.o.retry != nil {
		opts[0] = lease.WithRetry(g.o.retry)
	}
	if g.o.holder != "" {
		opts = append(opts, lease.WithHolder(g.o.holder))
	}
	for {
		l, err := g.locker.Obtain(ctx, key, g.o.lease, opts...)
		switch {
		case err == nil:
			return l, Result{}, false, nil
		case !errors.Is(err, lease.ErrNotObtained):
			return nil, Result{}, false, err
		}
		// Held: the run may have ended meanwhile.
		if r, found, err := g.recorded(ctx, id, key); found || err != nil && ctx.Err() == nil {
			return nil, r, found, err
		}
		var limit *lease.WaitLimitError
		if ctx.Err() == nil && g.o.retry != nil && errors.As(err, &limit) {
			continue // the backend's own wait limit ended the wait: wait again
		}
		busy := g.busy(ctx, id, key)
		if ctx.Err() != nil {
			return nil, Result{}, false, lease.Join(busy, ctx.Err())
		}
		return nil, Result{}, false, busy
	}
}

// busy returns the InProgressError of the job held by another worker, with
// when to look again.
func (g *Group) busy(ctx context.Context, id, key string) *InProgressError {
	e := &InProgressError{ID: id, RetryAfter: g.o.lease}
	info, err := g.locker.Inspect(context.WithoutCancel(ctx), key)
	switch {
	case err != nil:
	case info.Held:
		// A lease ends in the millisecond after its TTL.
		e.Holder, e.TTL, e.RetryAfter = info.Holder, info.TTL, info.TTL+time.Millisecond
	default:
		e.RetryAfter = 0 // given back meanwhile: look again now
	}
	return e
}

// run runs job under l, records its outcome and releases l.
func (g *Group) run(ctx context.Context, key string, l lease.Lock, job Job) (Result, error) {
	start := g.o.clock.Now()
	fence := l.Fence()
	res := Result{Fence: fence, Ran: true}
	var recErr error
	runErr := lease.RunLock(ctx, l, g.o.lease, func(jctx context.Context) error {
		var jobErr error
		res.Value, jobErr = job(jctx, fence)
		recErr = g.record(ctx, key, fence, start, res.Value, jobErr)
		return jobErr
	}, g.renewOptions()...)
	return res, lease.Join(runErr, recErr)
}

func (g *Group) renewOptions() []lease.Option {
	if g.o.renew > 0 {
		return []lease.Option{lease.WithRefreshInterval(g.o.renew)}
	}
	return nil
}

// record writes the outcome of the run with fence that began at start, as
// the scope says, on a context that outlives ctx's cancellation (bounded
// by the lease): a run that finished is recorded even if its caller gave
// up meanwhile.
func (g *Group) record(ctx context.Context, key string, fence int64, start time.Time, value []byte, jobErr error) error {
	s := g.o.scope
	if jobErr != nil && !s.failed {
		return nil // UntilDone: a failed job can run again
	}
	ttl := g.o.retention
	if s.period > 0 {
		ttl = s.period - g.o.clock.Now().Sub(start)
		if ttl < time.Millisecond {
			return nil // the period is over already
		}
	}
	rec := encodeDone(value)
	if jobErr != nil {
		rec = encodeFailed(jobErr)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.o.lease)
	defer cancel()
	return g.store.Put(wctx, key, rec, fence, ttl)
}
