package leader

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redislock-go/redislock/lease"
)

var (
	// ErrNoLeader is returned by Leader when nobody leads the election.
	ErrNoLeader = errors.New("redislock: no leader")

	// ErrResigned is the cause of a Term's context after Resign.
	ErrResigned = errors.New("redislock: leadership resigned")
)

// Election is one candidate in the election of a name: it campaigns for
// the election's lock (Key) on a lease.Locker, and while it holds the lock
// it leads. Every candidate of one election uses the same name and prefix,
// on the same backend, each with its own Election and identity. Its
// methods are safe for concurrent use.
type Election struct {
	locker lease.Locker
	name   string
	key    string
	o      options

	campaign chan struct{} // a token: one Campaign at a time

	mu      sync.Mutex
	current *Term         // guarded by mu: the last term won, nil after Resign
	changed chan struct{} // guarded by mu: closed and replaced on a local change
}

// Info is who leads an election, as the backend reported it.
type Info struct {
	// Identity is the leader's identity (WithHolder); "" when nobody
	// leads.
	Identity string
	// Term is the leader's term: the fence of its lock, greater than every
	// earlier term's; 0 when nobody leads.
	Term int64
	// TTL is the leader's lease left on the backend when it answered.
	TTL time.Duration
}

// New returns a candidate in the election name on locker. It fails with an
// error matching lease.ErrInvalidArgument on a nil locker, an empty name or
// an invalid option.
func New(locker lease.Locker, name string, opts ...Option) (*Election, error) {
	if locker == nil {
		return nil, lease.Invalid("nil Locker")
	}
	if name == "" {
		return nil, lease.Invalid("empty election name")
	}
	o, err := apply(opts)
	if err != nil {
		return nil, err
	}
	return &Election{
		locker:   locker,
		name:     name,
		key:      lease.Key(o.prefix, name),
		o:        o,
		campaign: make(chan struct{}, 1),
		changed:  make(chan struct{}),
	}, nil
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// Identity returns the candidate's identity.
func (e *Election) Identity() string { return e.o.holder }

// Key returns the lock key of the election: lease.Key(prefix, name),
// "leader:|scheduler" for the election "scheduler" by default.
func (e *Election) Key() string { return e.key }

// Campaign waits until this candidate leads, or ctx ends, and returns its
// Term. It waits in the Locker's Obtain, which wakes it when the leader
// resigns or its lease ends (or after the WithRetry backoff, at the latest), so
// a resignation hands over at once on a notifying backend.
//
// The Term is renewed in the background until Resign or until it is lost;
// its Context is not ctx's: ctx bounds the campaign only (the Term keeps
// ctx's values). A Campaign while this Election leads returns the current
// Term; concurrent Campaigns wait for each other.
//
// When ctx ends first, the error matches lease.ErrNotObtained and ctx's
// error. A backend that cannot be reached returns its error (never
// ErrNotObtained): campaign again after a backoff of your own.
func (e *Election) Campaign(ctx context.Context) (*Term, error) {
	if ctx == nil {
		return nil, lease.Invalid("nil context")
	}
	select {
	case e.campaign <- struct{}{}:
	case <-ctx.Done():
		return nil, lease.Join(lease.ErrNotObtained, ctx.Err())
	}
	defer func() { <-e.campaign }()
	if t := e.Current(); t != nil {
		return t, nil
	}
	for {
		l, err := e.locker.Obtain(ctx, e.key, e.o.lease,
			lease.WithHolder(e.o.holder), lease.WithRetry(e.o.retry))
		switch {
		case err == nil:
		case ctx.Err() != nil:
			if !errors.Is(err, ctx.Err()) {
				err = lease.Join(lease.ErrNotObtained, ctx.Err())
			}
			return nil, err
		case errors.As(err, new(*lease.WaitLimitError)):
			continue // the backend's own wait limit: wait again
		default:
			return nil, err
		}
		t, err := e.newTerm(ctx, l)
		if err != nil {
			return nil, err
		}
		if t == nil {
			continue // confirmed too late to lead: the lock was given back
		}
		e.mu.Lock()
		e.current = t
		e.wake()
		e.mu.Unlock()
		return t, nil
	}
}

// Current returns the Term this Election leads, or nil when it does not
// (it never won, it resigned, or its term was lost).
func (e *Election) Current() *Term {
	e.mu.Lock()
	t := e.current
	e.mu.Unlock()
	if t == nil || t.Err() != nil {
		return nil
	}
	return t
}

// Resign gives up the current Term, if this Election leads (see
// Term.Resign), and returns nil if it does not.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	t := e.current
	e.mu.Unlock()
	if t == nil {
		return nil
	}
	return t.Resign(ctx)
}

// ended forgets t as the current term and wakes this Election's observers.
func (e *Election) ended(t *Term) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.current == t {
		e.current = nil
	}
	e.wake()
}

// wake wakes this Election's observers. e.mu held.
func (e *Election) wake() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// Leader returns who leads the election, as the backend sees it now, or
// ErrNoLeader when nobody does. Another candidate may have taken over by
// the time it returns: only the leader's own Term says it leads.
func (e *Election) Leader(ctx context.Context) (Info, error) {
	info, err := e.locker.Inspect(ctx, e.key)
	if err != nil {
		return Info{}, err
	}
	if !info.Held {
		return Info{}, ErrNoLeader
	}
	return Info{Identity: info.Holder, Term: info.Fence, TTL: info.TTL}, nil
}
