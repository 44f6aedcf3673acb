package observe

import (
	"context"
	"time"
)

// The events of package stampede: how each Do was answered, and the fills
// that computed the values.

// CacheObserver is told how each Do of a stampede Group was answered.
type CacheObserver interface {
	CacheDone(ctx context.Context, e CacheEvent)
}

// CacheResult is how a Do was answered.
type CacheResult string

// The results of a stampede Do. Callers that share an in-process flight
// each get its result.
const (
	CacheHit    CacheResult = "hit"    // the value (or a cached miss) was in the cache
	CacheFilled CacheResult = "filled" // this process filled it
	CacheWaited CacheResult = "waited" // it waited while another process filled it
	CacheError  CacheResult = "error"  // a failed fill, the backend failed, or ctx ended
)

// CacheEvent ends a Do call.
type CacheEvent struct {
	Key    string
	Result CacheResult
	Wait   time.Duration // from the call to its return
	Err    error
}

// FillObserver is told about the fills a Group runs: of a missing value
// (under its lock) or an early refresh. The ctx FillStart returns is the
// fill function's (with its deadline and cancellation), so a span it starts
// holds the fill's own calls.
type FillObserver interface {
	FillStart(ctx context.Context, e FillStartEvent) context.Context
	FillDone(ctx context.Context, e FillDoneEvent)
}

// FillStartEvent begins a fill.
type FillStartEvent struct {
	Key     string
	Refresh bool // an early refresh (WithEarlyRefresh)
}

// FillDoneEvent ends a fill. Err is the fill's error (a *stampede.PanicError
// for a panic, the fill timeout's or the lost lock's error), nil when it
// returned a value; it matches stampede's ErrMissing for a missing value.
type FillDoneEvent struct {
	Key      string
	Refresh  bool
	Duration time.Duration
	Err      error
}
