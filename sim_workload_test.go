package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/sim"
)

// client is one client's workload: until the run's end, lock a random
// key with a random TTL, by Obtain (holding it a while, refreshing now
// and then, then releasing) or by Run, and report to the history what it
// was given and when it stopped holding.
func (w *simWorld) client(c int) {
	r := sim.NewRand(w.seed, 2, uint64(c))
	cl, closeAll := w.newClient(c, r)
	defer closeAll()
	pass(r.Between(time.Microsecond, time.Millisecond)) // the clients do not start on one instant
	for time.Since(w.start) < w.cfg.Duration {
		key := fmt.Sprintf("k%d", r.Intn(w.cfg.Keys))
		ttl := r.Between(w.cfg.MinTTL, w.cfg.MaxTTL).Truncate(time.Millisecond)
		hold := r.Between(0, ttl*3/2)
		retry := redislock.WithRetry(redislock.LimitRetry(redislock.LinearBackoff(r.Between(5*time.Millisecond, 40*time.Millisecond)), 3))
		if r.Chance(0.3) {
			w.runOnce(c, cl, key, ttl, hold, retry)
		} else {
			w.obtainOnce(c, r, cl, key, ttl, hold, retry)
		}
		pass(r.Between(0, 20*time.Millisecond))
	}
}

func (w *simWorld) grant(c int, key string, called time.Time, l *redislock.Lock) *sim.Grant {
	if w.mut.late {
		pass(time.Until(l.ValidUntil()) + time.Millisecond)
	}
	g := &sim.Grant{Client: c, Key: key, Token: l.Token(), Fence: l.Fence(), Called: called,
		Returned: time.Now(), ValidUntil: l.ValidUntil(), Valid: l.ValidUntil}
	w.hist.Granted(g)
	return g
}

func (w *simWorld) obtainOnce(c int, r *sim.Rand, cl *redislock.Client, key string, ttl, hold time.Duration, retry redislock.Option) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*w.cfg.MaxTTL)
	defer cancel()
	called := time.Now()
	l, err := cl.Obtain(ctx, key, ttl, retry)
	if err != nil {
		w.hist.Log(c, "obtain %s ttl %v: %v", key, ttl, err)
		return
	}
	g := w.grant(c, key, called, l)
	for end := time.Now().Add(hold); time.Now().Before(end); {
		pass(min(time.Until(end), ttl/3))
		if !r.Chance(0.6) {
			continue
		}
		err := l.Refresh(context.Background(), ttl)
		switch {
		case err == nil:
		case errors.Is(err, redislock.ErrNotHeld):
			w.hist.Ended(g, "refresh: not held")
			return
		default:
			w.hist.Log(c, "refresh fence %d: %v", g.Fence, err)
		}
	}
	w.hist.Ended(g, "release")
	if err := l.Release(context.Background()); err != nil {
		w.hist.Log(c, "release fence %d: %v", g.Fence, err)
	}
}

func (w *simWorld) runOnce(c int, cl *redislock.Client, key string, ttl, hold time.Duration, retry redislock.Option) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*w.cfg.MaxTTL+hold)
	defer cancel()
	called := time.Now()
	err := cl.Run(ctx, key, ttl, func(ctx context.Context, l *redislock.Lock) error {
		g := w.grant(c, key, called, l)
		t := time.NewTimer(hold)
		defer t.Stop()
		select {
		case <-t.C:
			w.hist.Ended(g, "run: fn returned")
			return nil
		case <-ctx.Done():
			w.hist.Ended(g, fmt.Sprintf("run: loss reported (%v)", context.Cause(ctx)))
			return ctx.Err()
		}
	}, retry)
	if err != nil {
		w.hist.Log(c, "run %s ttl %v: %v", key, ttl, err)
	}
}
