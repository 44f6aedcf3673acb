package stampede

import (
	"context"
	"time"

	"github.com/redislock-go/redislock/observe"

	"github.com/redislock-go/redislock/lease"
)

// WithObserver adds o to the Group's observers: a value that implements
// observe.CacheObserver (how each Do was answered: hit, filled, waited,
// error) or observe.FillObserver (each fill and early refresh, with its
// error), or both, such as the metric adapters (extra/redislockprom,
// extra/redislockotel). The option may be given more than once; a value
// that implements neither is an invalid option. Default: none, and a Group
// without observers builds no event.
func WithObserver(o observe.Observer) Option {
	return func(opts *options) {
		c, isCache := o.(observe.CacheObserver)
		f, isFill := o.(observe.FillObserver)
		if !isCache && !isFill {
			opts.fail(lease.Invalid("%T implements neither observe.CacheObserver nor observe.FillObserver", o))
			return
		}
		if isCache {
			opts.cacheObservers = append(opts.cacheObservers, c)
		}
		if isFill {
			opts.fillObservers = append(opts.fillObservers, f)
		}
	}
}

// cacheDone tells the cache observers how a Do that began at start and
// returned err was answered: by flight f, or nil when the caller left.
func (g *Group) cacheDone(ctx context.Context, key string, f *flight, start time.Time, err error) {
	result := observe.CacheError
	if f != nil && f.result != "" {
		result = f.result
	}
	e := observe.CacheEvent{Key: key, Result: result, Wait: time.Since(start), Err: err}
	for _, x := range g.o.cacheObservers {
		x.CacheDone(ctx, e)
	}
}

// observeFill runs fill (a callFill) for key and tells the fill observers;
// fill gets the context their FillStart returned.
func (g *Group) observeFill(ctx context.Context, key string, refresh bool, fill Fill) (val []byte, err error) {
	obs := g.o.fillObservers
	if len(obs) == 0 {
		return fill(ctx)
	}
	start := time.Now()
	for _, x := range obs {
		ctx = x.FillStart(ctx, observe.FillStartEvent{Key: key, Refresh: refresh})
	}
	returned := false
	defer func() {
		if !returned { // fill called runtime.Goexit
			err = errGoexit
		}
		e := observe.FillDoneEvent{Key: key, Refresh: refresh, Duration: time.Since(start), Err: err}
		for _, x := range obs {
			x.FillDone(ctx, e)
		}
	}()
	val, err = fill(ctx)
	returned = true
	return val, err
}
