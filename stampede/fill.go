package stampede

import (
	"context"
	"errors"
	"runtime/debug"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
)

// The cold path.
//
// A flight that found no value takes the fill lock. If the lock is free,
// the flight reads the Store again under it (a fill may have finished
// since the first read) and fills. If it is held, the flight notes the
// holder's fence (Inspect) and waits for the lock (Obtain with the WithRetry
// strategy, woken by the holder's release). Under the lock it finds one of:
//
//   - a value, or a cached miss: the fill it waited for succeeded; it
//     releases the lock and returns that;
//   - a failure record with a fence at least the holder's it noted: the
//     fill it waited for failed; it returns the error (or, with
//     WithFillRetries, fills again);
//   - nothing (or an older failure): the holder died or lost its lock
//     without a result; this flight is its successor and fills.
//
// A caller that arrives after a failure, so that it waited for no one,
// ignores the failure record and fills: a failure is handed to those that
// waited for it, never cached.

func (g *Group) lockOpts(wait lease.RetryStrategy) []lease.Option {
	opts := []lease.Option{lease.WithRetry(wait)}
	if g.o.holder != "" {
		opts = append(opts, lease.WithHolder(g.o.holder))
	}
	return opts
}

// fillCold takes the fill lock for f, waiting while another holds it, and
// returns the value or error that f's callers get.
func (g *Group) fillCold(ctx context.Context, f *flight) ([]byte, error) {
	k := lease.Key(g.o.namespace, f.key)
	var seen int64 // the fence of the first holder this flight waited for; 0: none
	failures := 0
	for {
		l, err := g.locker.Obtain(ctx, k, g.o.lockTTL, g.lockOpts(lease.NoRetry())...)
		if errors.Is(err, lease.ErrNotObtained) {
			if seen == 0 {
				info, ierr := g.locker.Inspect(ctx, k)
				if ierr != nil {
					return nil, g.backendErr(ctx, "inspect", f.key, ierr)
				}
				if !info.Held {
					continue // released meanwhile
				}
				seen = info.Fence
				g.hook(evWait, f.key)
			}
			l, err = g.locker.Obtain(ctx, k, g.o.lockTTL, g.lockOpts(g.o.wait)...)
			if errors.Is(err, lease.ErrNotObtained) && ctx.Err() == nil {
				continue // the Locker's own wait limit: the callers still wait
			}
		}
		if err != nil {
			return nil, g.backendErr(ctx, "lock", f.key, err)
		}
		val, err, again := g.underLock(ctx, f, l, &seen, &failures)
		if !again {
			return val, err
		}
	}
}

// underLock decides, holding l, between the result a fill left and a fill
// of its own. again asks fillCold to take the lock once more (a retry).
func (g *Group) underLock(ctx context.Context, f *flight, l lease.Lock, seen *int64, failures *int) (val []byte, err error, again bool) {
	k := lease.Key(g.o.namespace, f.key)
	rec, err := g.store.Get(ctx, k)
	switch {
	case err == nil:
		kind, payload, ok := decode(rec.Value)
		switch {
		case !ok:
		case kind == kindValue || kind == kindMissing:
			g.releaseAsync(l, f.key) // the callers need not wait for it
			val, err, _ := cached(f.key, rec)
			f.result = observe.CacheHit // filled between the first read and the lock
			if *seen > 0 {
				f.result = observe.CacheWaited
			}
			return val, err, false
		case *seen > 0 && rec.Fence >= *seen:
			// The fill this flight waited for failed.
			*failures++
			*seen = l.Fence() + 1 // only failures after this point count
			if *failures > g.o.fillRetries {
				g.release(l, f.key)
				return nil, outcome(f.key, kind, payload, rec.Fence), false
			}
		}
	case !errors.Is(err, lease.ErrNotFound):
		g.release(l, f.key)
		return nil, g.backendErr(ctx, "read", f.key, err), false
	}
	return g.fillHeld(ctx, f, l, seen, failures)
}

// fillHeld runs f's fill under l and stores its outcome with l's fence.
func (g *Group) fillHeld(ctx context.Context, f *flight, l lease.Lock, seen *int64, failures *int) (val []byte, err error, again bool) {
	if !g.beginFill(f) { // every caller left while the flight waited
		g.release(l, f.key)
		return nil, ctx.Err(), false
	}
	g.hook(evFill, f.key)
	k := lease.Key(g.o.namespace, f.key)
	fctx, cancel := context.WithTimeout(ctx, g.o.fillTimeout)
	defer cancel()
	var fillErr error
	runErr := lease.RunLock(fctx, l, g.o.lockTTL, func(rctx context.Context) error {
		val, fillErr = g.observeFill(rctx, f.key, false, func(ctx context.Context) ([]byte, error) {
			return g.callFill(ctx, l, k, true, f.fill)
		})
		if rctx.Err() == nil {
			g.storeOutcome(rctx, l, f.key, f.ttl, val, fillErr)
			return fillErr
		}
		if fillErr == nil {
			fillErr = context.Cause(rctx)
		}
		if timedOut(rctx, fctx, ctx) {
			// The fill timed out, the lock still held: the callers
			// waiting in other processes get the timeout, as this
			// flight's callers do, instead of filling in turn (each
			// another fill timeout). The flight's ctx is still alive.
			g.storeOutcome(ctx, l, f.key, f.ttl, nil, fillErr)
		}
		// Lock lost or Close: store nothing, so that a successor fills.
		return fillErr
	})
	switch {
	case fillErr != nil || errors.Is(runErr, lease.ErrLockLost):
		*failures++
		*seen = l.Fence() + 1
		if *failures <= g.o.fillRetries && ctx.Err() == nil {
			return nil, nil, true
		}
		if fillErr == nil {
			return nil, runErr, false
		}
		return nil, lease.Join(fillFailed(fillErr), lockLost(runErr)), false
	case runErr != nil:
		// The value is stored; only the release failed.
		g.o.onError(f.key, runErr)
	}
	f.result = observe.CacheFilled
	return val, nil, false
}

// timedOut reports whether rctx, the fill's ctx under its lock, ended at
// the fill timeout (fctx's deadline) and not because the lock was lost or
// the flight's ctx ended (Close).
func timedOut(rctx, fctx, flight context.Context) bool {
	return flight.Err() == nil && errors.Is(context.Cause(fctx), context.DeadlineExceeded) &&
		!errors.Is(context.Cause(rctx), lease.ErrLockLost)
}

// lockLost returns err if it reports a lost lock, else nil.
func lockLost(err error) error {
	if errors.Is(err, lease.ErrLockLost) {
		return err
	}
	return nil
}

// storeOutcome writes a fill's value, or its failure for the callers that
// wait in other processes, with l's fence.
func (g *Group) storeOutcome(ctx context.Context, l lease.Lock, key string, ttl time.Duration, val []byte, fillErr error) {
	k := lease.Key(g.o.namespace, key)
	var err error
	switch {
	case fillErr == nil:
		err = g.store.Put(ctx, k, encode(kindValue, val), l.Fence(), ttl)
		if err != nil {
			err = lease.Wrap(err, "stampede: store %q", key)
		} else {
			g.hook(evStored, key)
		}
	case errors.Is(fillErr, ErrMissing) && g.o.negativeTTL > 0:
		err = g.store.Put(ctx, k, encode(kindMissing, []byte(fillErr.Error())), l.Fence(), g.o.negativeTTL)
	default:
		err = g.putFailure(ctx, l, k, fillErr)
	}
	if err != nil {
		g.o.onError(key, err)
	}
}

// putFailure records a failed fill for the lock TTL: long enough for the
// callers queued for the lock to read it.
func (g *Group) putFailure(ctx context.Context, l lease.Lock, k string, fillErr error) error {
	kind := kindFailure
	var pe *PanicError
	switch {
	case errors.As(fillErr, &pe):
		kind = kindPanic
	case errors.Is(fillErr, ErrMissing):
		kind = kindMissed
	}
	return g.store.Put(ctx, k, encode(kind, []byte(fillErr.Error())), l.Fence(), g.o.lockTTL)
}

// callFill runs fill, turning a panic into a *PanicError. If fill calls
// runtime.Goexit, the failure is recorded (cold fills only) while the lock
// is still held; the goroutine then ends, and the deferred functions of
// RunLock and of the flight release the lock and answer the callers.
func (g *Group) callFill(ctx context.Context, l lease.Lock, k string, cold bool, fill Fill) (val []byte, err error) {
	normal, recovered := false, false
	defer func() {
		if !normal && !recovered && cold {
			_ = g.putFailure(ctx, l, k, errGoexit)
		}
	}()
	func() {
		defer func() {
			if !normal {
				if r := recover(); r != nil {
					recovered = true
					err = &PanicError{Value: r, Stack: debug.Stack()}
				}
			}
		}()
		val, err = fill(ctx)
		normal = true
	}()
	return val, err
}

// releaseAsync releases l in a goroutine of the Group's (Close waits for
// it).
func (g *Group) releaseAsync(l lease.Lock, key string) {
	g.wg.Add(1) // the flight's own count keeps the group's above zero
	go func() {
		defer g.wg.Done()
		g.release(l, key)
	}()
}

// release gives the lock back after a read under it; an error (the lease
// ended, the backend is unreachable) only delays the next holder until the
// lease ends.
func (g *Group) release(l lease.Lock, key string) {
	if err := l.Release(g.ctx); err != nil && !errors.Is(err, lease.ErrNotHeld) {
		g.o.onError(key, lease.Wrap(err, "stampede: release %q", key))
	}
}
