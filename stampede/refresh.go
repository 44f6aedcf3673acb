package stampede

import (
	"context"
	"errors"

	"github.com/redislock-go/redislock/lease"
)

// Early refresh (stale-while-revalidate).
//
// A flight that reads a value with less than WithEarlyRefresh of its TTL
// left returns it and starts a refresh, at most one per key in a process
// and WithMaxRefreshes in all. The refresh makes one attempt at the fill
// lock: held means another process refreshes (or fills) the key, and the
// refresh ends. Holding it, the refresh reads the record again: a fence
// other than the one the flight read means another refresher has already
// stored a new value. Else it fills, and stores the value with the lock's
// fence, higher than the old value's. A failed refresh stores nothing.

// maybeRefresh starts an early refresh of f's key if rec is due for one.
func (g *Group) maybeRefresh(f *flight, rec lease.Record) {
	if g.o.earlyRefresh == 0 || rec.TTL <= 0 || rec.TTL > g.o.earlyRefresh {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.refreshing[f.key] || len(g.refreshing) >= g.o.maxRefreshes {
		return
	}
	g.refreshing[f.key] = true
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() {
			g.mu.Lock()
			delete(g.refreshing, f.key)
			g.mu.Unlock()
		}()
		ctx, cancel := g.child(f.vals)
		defer cancel()
		if err := g.refresh(ctx, f, rec.Fence); err != nil {
			g.o.onError(f.key, lease.Wrap(err, "stampede: refresh %q", f.key))
		}
	}()
}

// refresh fills f's key again if it still holds the value of fence.
func (g *Group) refresh(ctx context.Context, f *flight, fence int64) error {
	k := lease.Key(g.o.namespace, f.key)
	l, err := g.locker.Obtain(ctx, k, g.o.lockTTL, g.lockOpts(lease.NoRetry())...)
	if errors.Is(err, lease.ErrNotObtained) {
		return nil // another process refreshes or fills it
	}
	if err != nil {
		return err
	}
	rec, err := g.store.Get(ctx, k)
	switch {
	case err == nil && rec.Fence != fence:
		g.release(l, f.key)
		return nil // refreshed by another process already
	case err != nil && !errors.Is(err, lease.ErrNotFound):
		g.release(l, f.key)
		return err
	}
	g.hook(evFill, f.key)
	fctx, cancel := context.WithTimeout(ctx, g.o.fillTimeout)
	defer cancel()
	return lease.RunLock(fctx, l, g.o.lockTTL, func(ctx context.Context) error {
		val, err := g.observeFill(ctx, f.key, true, func(ctx context.Context) ([]byte, error) {
			return g.callFill(ctx, l, k, false, f.fill)
		})
		if err != nil {
			return fillFailed(err)
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if err := g.store.Put(ctx, k, encode(kindValue, val), l.Fence(), f.ttl); err != nil {
			return err
		}
		g.hook(evStored, f.key)
		return nil
	})
}
