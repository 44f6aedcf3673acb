package peers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/redislock-go/redislock/bench/lockbench"
)

// rueidislockLibraries are the configurations of rueidislock (in the
// rueidis module): its defaults (a lock is 2 of 3 keys on the one Redis)
// and KeyMajority 1 (a single-key lock). It brings its own client, rueidis,
// on one connection with automatic pipelining, and wakes waiters through
// RESP3 client-side-caching invalidations. Its lock TTL (KeyValidity) is
// the scenario's TTL; it renews every KeyValidity/2 by itself.
func rueidislockLibraries() []lockbench.Library {
	return []lockbench.Library{
		{
			Name: "rueidislock/default", Primary: true,
			Note: "rueidislock defaults (KeyMajority 2: 2 of 3 keys), KeyValidity = TTL; WithContext, cancel to release; renews by itself every TTL/2",
			Dial: rueidislockWith(rueidislock.LockerOption{}),
		},
		{
			Name: "rueidislock/km1", Primary: true,
			Note: "rueidislock KeyMajority 1 (one key), KeyValidity = TTL, other options default",
			Dial: rueidislockWith(rueidislock.LockerOption{KeyMajority: 1}),
		},
	}
}

// rueidislockLocker makes its rueidis Locker on the first Obtain, when the
// TTL is known (KeyValidity is an option of the Locker, not of a call).
type rueidislockLocker struct {
	opt  rueidislock.LockerOption
	mu   sync.Mutex
	lk   rueidislock.Locker // guarded by mu; nil until the first call
	ttl  time.Duration      // guarded by mu: the KeyValidity of lk
	sent func(n int)
}

func rueidislockWith(opt rueidislock.LockerOption) func(addrs []string, sent func(n int)) (lockbench.Locker, error) {
	return func(addrs []string, sent func(n int)) (lockbench.Locker, error) {
		if len(addrs) != 1 {
			return nil, errors.New("rueidislock has no quorum of servers")
		}
		opt := opt
		opt.ClientOption.InitAddress = addrs
		return &rueidislockLocker{opt: opt, sent: sent}, nil
	}
}

// locker returns the Locker for ttl.
func (r *rueidislockLocker) locker(ttl time.Duration) (rueidislock.Locker, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.lk == nil:
		opt := r.opt
		opt.KeyValidity = ttl
		opt.ClientBuilder = func(o rueidis.ClientOption) (rueidis.Client, error) {
			c, err := rueidis.NewClient(o)
			if err != nil {
				return nil, err
			}
			return countedClient{c, r.sent}, nil
		}
		lk, err := rueidislock.NewLocker(opt)
		if err != nil {
			return nil, err
		}
		r.lk, r.ttl = lk, ttl
	case r.ttl != ttl:
		return nil, errors.New("rueidislock adapter: one TTL per run")
	}
	return r.lk, nil
}

type rueidislockHeld struct{ cancel context.CancelFunc }

// Release cancels the lock's context: rueidislock then deletes its keys
// and returns once it has.
func (h rueidislockHeld) Release(context.Context) error {
	h.cancel()
	return nil
}

// Obtain waits with WithContext. The lock's context derives from the one
// WithContext is given, and the lock ends when that context does: a
// context that bounds only the wait (a deadline) is detached from the lock
// once it is obtained, as a user who bounds the wait has to.
func (r *rueidislockLocker) Obtain(ctx context.Context, key string, ttl time.Duration) (lockbench.Held, error) {
	lk, err := r.locker(ttl)
	if err != nil {
		return nil, err
	}
	if _, bounded := ctx.Deadline(); !bounded {
		_, cancel, err := lk.WithContext(ctx, key)
		return r.held(ctx, cancel, err)
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	unhook := context.AfterFunc(ctx, stop)
	_, cancel, err := lk.WithContext(wctx, key)
	if !unhook() { // ctx ended: the wait, or the lock just obtained, ends too
		if err == nil {
			cancel()
		}
		stop()
		return nil, errors.Join(lockbench.ErrBusy, ctx.Err())
	}
	if err != nil {
		stop()
	}
	return r.held(ctx, cancel, err)
}

func (r *rueidislockLocker) held(ctx context.Context, cancel context.CancelFunc, err error) (lockbench.Held, error) {
	switch {
	case err == nil:
		return rueidislockHeld{cancel}, nil
	case errors.Is(err, rueidislock.ErrNotLocked), ctx.Err() != nil:
		return nil, errors.Join(lockbench.ErrBusy, err)
	}
	return nil, err
}

// Hold runs fn on the lock's own context: rueidislock renews the lock and
// cancels that context when it loses it.
func (r *rueidislockLocker) Hold(ctx context.Context, key string, ttl time.Duration, fn func(context.Context) error) error {
	lk, err := r.locker(ttl)
	if err != nil {
		return err
	}
	lctx, cancel, err := lk.WithContext(ctx, key)
	if err != nil {
		return err
	}
	defer cancel()
	return fn(lctx)
}

func (r *rueidislockLocker) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lk != nil {
		r.lk.Close()
		r.lk = nil
	}
	return nil
}

// countedClient counts the commands rueidislock sends (its scripts go
// through Do).
type countedClient struct {
	rueidis.Client
	sent func(n int)
}

func (c countedClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.sent(1)
	return c.Client.Do(ctx, cmd)
}

func (c countedClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.sent(len(cmds))
	return c.Client.DoMulti(ctx, cmds...)
}
