// Package stampede fills a cache entry once across every process that
// shares a lock backend, instead of once per request (a cache stampede, or
// thundering herd, when a hot entry is cold or expires).
//
//	g, err := stampede.New(client.Locker(), client.Store())
//	...
//	v, err := g.Do(ctx, "price:42", time.Minute, func(ctx context.Context) ([]byte, error) {
//		return db.Price(ctx, 42) // runs once, fleet-wide
//	})
//
// It is written against the lease contract only: the Redis Client
// (redislock.Client.Locker and Client.Store) and any backend that passes
// lease/leasetest serve as Locker and Store; leasetest.Memory makes tests
// of code built on it fast and deterministic.
//
// # How a Do call goes
//
//  1. In the process, the callers of a key join one flight: one read of
//     the Store for all of them, whatever their number.
//  2. A value (or a cached miss) is returned at once.
//  3. On a miss, the flight takes the key's fill lock. If it is free, the
//     flight reads again under it and fills: it runs fill under the lock
//     (renewed by lease.RunLock while fill runs) and stores the value with
//     the lock's fence, so that a filler whose lease ended cannot
//     overwrite a newer value.
//  4. If the lock is held, the flight waits for it, woken by the
//     holder's release (the Redis Client's notified waiting: pub/sub, not
//     polling; the cache is read once more, under the lock, after the
//     wake-up), and returns the value the filler stored.
//
// Per cold key, each process makes a handful of Redis calls whatever its
// number of callers, and one process fills.
//
// # Failures
//
// A fill that returns an error, panics, calls runtime.Goexit, or times out
// (WithFillTimeout) does not poison the cache and leaves nothing hanging.
// Its callers get the error (matching ErrFillFailed; a panic is a
// *PanicError), and so do the callers that waited for it in other
// processes: the filler records the failure, with its fence, for the lock
// TTL, and a waiter that finds a failure no older than the holder it
// waited for returns it (a *FillError with the message). Callers that come
// later fill again. WithFillRetries makes waiters fill again instead. A
// fill that times out is such a failure: it runs once, and every caller
// that waited for it, in any process, gets its timeout (matching
// context.DeadlineExceeded here, a *FillError elsewhere) about one fill
// timeout after the fill began, not one fill timeout per process in turn.
// That holds for a fill that returns when its ctx ends, as Fill asks: one
// that ignores its ctx keeps its callers until it returns.
//
// If the filling process dies, its lock expires after WithLease (default
// 5 s) and one waiting process fills in its place. If the fill's lock is
// lost (its renewals failed, or it was deleted), the fill's ctx ends with
// a cause matching lease.ErrLockLost, nothing is stored, and its callers
// get the loss.
//
// # Contexts
//
// A flight runs on a context of its own, with the first caller's values:
// a caller whose ctx ends returns at once with its ctx's error, and the
// fill goes on for the others and for the cache. A flight still waiting
// for another process's fill ends when its last caller left. The fill's
// ctx ends at the fill timeout, when its lock is lost, or at Close.
//
// # Options
//
// WithNegativeTTL caches misses (a fill that returns ErrMissing).
// WithEarlyRefresh serves a value near the end of its TTL while one
// process, fleet-wide, refreshes it in the background (stale-while-
// revalidate). WithLease, WithFillTimeout, WithRetry, WithHolder,
// WithPrefix, WithMaxRefreshes and WithErrorHandler tune the rest.
//
// # Observing
//
// WithObserver reports how each Do was answered (observe.CacheObserver:
// a hit, filled by this process, waited for another process's fill, or an
// error; callers that share a flight each get its result) and each fill
// and early refresh with its error (observe.FillObserver; the fill runs on
// the context FillStart returns, so a trace span holds the fill's own
// calls). A fill that finds the value missing (ErrMissing) counts as an
// error, a cached miss read later as a hit. The metric adapters
// (extra/redislockprom, extra/redislockotel) count them; a Group without
// observers builds no event.
//
// # Limits
//
//   - Values are bytes; encode and decode them yourself. The slice Do
//     returns is shared by the callers of a flight: do not modify it.
//   - The first caller's ttl and fill serve every caller of its flight.
//   - Waiting processes are served one after another: each takes the lock
//     to read the value (one grant, read and release each). With three
//     processes on a local Redis the last caller has the value a couple of
//     milliseconds after the fill ended; the cost grows with the number of
//     processes waiting for one key, not with the number of callers.
//   - If storing the value fails, the callers still get it, the failure is
//     reported to WithErrorHandler, and the next process fills again.
//   - A failure record hands the error only to those that waited for that
//     fill; a caller that arrived while another process was reading the
//     value under the lock may fill again instead.
//   - An early refresh is one attempt at the lock: while another process
//     refreshes, each flight of a process in the refresh window makes one
//     more attempt. A refresh that fails leaves the value until its TTL.
//   - Without a Locker that wakes waiters (a polling backend), waiting
//     processes notice the release at their next WithRetry backoff.
//   - A Store error on the first read is the callers' error: the Group
//     does not fill behind an unreadable cache.
package stampede
