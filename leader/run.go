package leader

import (
	"context"
	"errors"
	"sync"

	"github.com/redislock-go/redislock/lease"
)

// Callbacks are what Run calls, in the style of client-go's leader
// election.
type Callbacks struct {
	// OnStartedLeading is the leader's work, called once this candidate
	// leads, with a context that is cancelled when the term ends or Run's
	// ctx ends, and the Term (send Term.Fence with every write). Run waits
	// for it to return before it gives up the lock. Required.
	OnStartedLeading func(ctx context.Context, t *Term) error
	// OnStoppedLeading, if set, is called after the term is over and its
	// lock given back (or lost), also when OnStartedLeading panicked; never
	// when this candidate did not lead.
	OnStoppedLeading func()
	// OnNewLeader, if set, is called with the identity of each new leader
	// as Observe sees it (this candidate's own included), one call at a
	// time, from a goroutine of Run's that runs while Run does and
	// concurrently with OnStartedLeading. Run returns after its last call
	// has returned.
	OnNewLeader func(identity string)
}

// Run campaigns until this candidate leads, runs OnStartedLeading as the
// leader, and when it returns gives up leadership (Term.Resign) and
// returns: one term per call. To stay a candidate, call Run in a loop until
// your ctx ends.
//
// If the term is lost while OnStartedLeading runs, its ctx is cancelled
// (before the lease can end on the backend, see Term), and Run still waits
// for it to return, then returns its error joined with one matching
// lease.ErrLockLost. When ctx ends while leading, the work's ctx is
// cancelled, and Run waits for it, resigns and returns the work's error.
// When ctx ends before this candidate leads, Run returns Campaign's error
// (matching lease.ErrNotObtained and ctx's error); a backend error while
// campaigning is returned likewise.
//
// If OnStartedLeading panics, Run resigns, calls OnStoppedLeading and lets
// the panic go on. No goroutine started by Run outlives it.
func (e *Election) Run(ctx context.Context, cb Callbacks) error {
	if cb.OnStartedLeading == nil {
		return lease.Invalid("nil OnStartedLeading")
	}
	if ctx == nil {
		return lease.Invalid("nil context")
	}
	if cb.OnNewLeader != nil {
		octx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			last := ""
			for info := range e.Observe(octx) {
				if info.Identity != "" && info.Identity != last {
					last = info.Identity
					cb.OnNewLeader(info.Identity)
				}
			}
		})
		defer func() {
			stop()
			wg.Wait()
		}()
	}
	t, err := e.Campaign(ctx)
	if err != nil {
		return err
	}
	return e.lead(ctx, t, cb)
}

// lead runs the leader's work for the term t, then resigns.
func (e *Election) lead(ctx context.Context, t *Term, cb Callbacks) error {
	wctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()
	resignCtx := context.WithoutCancel(ctx)
	returned := false
	defer func() {
		if !returned { // the work panicked
			_ = t.Resign(resignCtx)
			if cb.OnStoppedLeading != nil {
				cb.OnStoppedLeading()
			}
		}
	}()
	werr := cb.OnStartedLeading(wctx, t)
	returned = true
	lost := t.lost()
	rerr := t.Resign(resignCtx)
	if cb.OnStoppedLeading != nil {
		cb.OnStoppedLeading()
	}
	switch {
	case lost != nil:
		return lease.Join(werr, lost)
	case rerr != nil && !errors.Is(rerr, lease.ErrNotHeld):
		return lease.Join(werr, rerr)
	}
	return werr
}
