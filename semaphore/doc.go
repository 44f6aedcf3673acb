// Package semaphore limits a named resource to N holders at once across
// every process that shares a Redis: processing slots, connections to a
// fragile service, licences.
//
//	sem, err := semaphore.New(rdb, "transcoders", 4)
//	...
//	defer sem.Close()
//	p, err := sem.Acquire(ctx, 30*time.Second) // waits for a slot
//	...
//	err = lease.RunLock(ctx, p, 30*time.Second, func(ctx context.Context) error {
//		return transcode(ctx, p.Fence())
//	})
//
// # Permits
//
// Each holder has a Permit of its own: a lease with its own random token,
// a slot in [0, N) (the smallest free one when it was granted) and a fence
// (strictly increasing across all permits of the semaphore). A Permit is a
// lease.Lock, so lease.Hold and lease.RunLock renew it and cancel the
// work's context when it is lost. Permits are released by token: a holder
// whose lease ended can neither renew nor release another's permit.
//
// # Server time
//
// Leases end on the Redis server's clock: every script reads TIME and the
// clients pass only durations, so a client with a wrong clock can neither
// keep a permit past its lease nor end another's early. A holder that dies
// frees its slot when its lease ends on the server; ValidUntil, the
// holder's own view, ends earlier by the drift allowance.
//
// The semaphore's time never goes back: the scripts keep the latest time
// they read and, when the server's clock steps back, carry on from it. A
// lease or a queue entry then ends later than it would have by at most the
// time between the last attempt, renewal or release before the step and
// the first call after it (a plain lock's key outlives its TTL by the
// whole step). A server clock stepped forward ends at once every lease
// with less than the step left, and its slot is granted again while its
// holder's validity lasts: each such step can add up to N valid permits
// (a 60 s step on a limit of 2 left 4 valid at once), as it gives a plain
// lock two holders. The permits granted after the step keep to the limit;
// each slot's fence is higher than its former holder's, so a resource
// that keeps the newest fence per slot refuses the former holder, whose
// next renewal reports the loss.
//
// # Waiting
//
// Acquire waits while all slots are held; TryAcquire does not. Waiters
// queue in arrival order, across processes, and a slot goes to the
// waiter at the head of the queue: a release publishes the ticket of the
// waiter it frees a slot for, and only that waiter wakes (pub/sub on one
// connection per Semaphore, opened by its first waiter and kept until
// Close; the connection is pinged when silent and replaced when it fails,
// and then every waiter tries again). A lease that ends without release
// publishes nothing: the
// waiters next in line wake when it ends. Each waiter also renews its
// place in the queue every third of the queue TTL (WithQueueTTL, default
// 3 s), which is also the longest a lost wake-up costs; the queue entry of
// a waiter that died lapses after the queue TTL (see Server time for a
// server clock step).
//
// # Fencing with N holders
//
// N holders are valid at once, so a resource cannot keep one "newest
// fence": keep one per slot. Write with the permit's fence to the slot's
// record (redislock.FencedSet on a key per slot, or a fence column per
// slot in SQL) and refuse a write whose fence is below its slot's newest.
// A holder paused past its lease, whose slot has since been given to
// another holder that wrote, is refused.
//
// # Keys
//
// A semaphore is five keys, "<prefix>{<name>}:sem" (its state) and
// "<prefix>{<name>}:sem:holders", ":sem:queue", ":sem:qdead" and
// ":sem:fence", hash-tagged by the name so that all live in one Redis
// Cluster slot, plus the pub/sub channel "<prefix>{<name>}:sem:wake"; the
// default prefix is "redislock:". A '}' or '%' in the name is
// percent-encoded ("%7D", "%25"), so two semaphores never share a key, and
// ":sem" keeps them from a lock's keys ("<prefix>{<name>}" and its
// helpers), whatever the prefixes. Every key expires with the last lease
// or queue entry it serves, and all but the fence counter are gone when no
// one holds or waits; the fence counter expires after the last grant, by
// its TTL (at least 1 s). Fences are the counter + 1 or the server clock in
// µs, whichever is higher, so they keep increasing after it expired (as
// long as the server clock does not step back).
//
// # Observing
//
// WithObserver reports every Acquire and TryAcquire (outcome, slot, fence,
// time to return), each call that waits in the queue, and each permit's
// renewals and release (package observe: AcquireObserver, QueueObserver,
// PermitObserver). The metric adapters (extra/redislockprom,
// extra/redislockotel) turn them into the permits held and the calls
// waiting; a Semaphore without observers builds no event. A grant
// confirmed after its validity, given back at once, is reported as an
// Acquire that failed and a release.
//
// # Limits
//
//   - One Redis: standalone, Sentinel (a failover client) or Cluster. No
//     quorum mode: a failover that loses writes can lose permits.
//   - Every user of a name must use the same limit while the semaphore is
//     in use (ErrLimitMismatch otherwise); the limit may change when no
//     one holds or waits. At most MaxLimit slots; a grant scans the slots
//     for a free one, so its cost grows with the limit.
//   - One slot per permit: no weighted acquire of several slots at once.
//   - A server clock stepped forward ends leases early: more than N
//     permits may be valid at once (Server time). Use fences per slot.
//   - Strict arrival order: while a waiter at the head of the queue is
//     stopped (SIGSTOP, a long GC pause), the slots it may take stay free
//     for up to the queue TTL.
//   - Acquire waits until its ctx ends: give it a deadline.
//   - Sharded pub/sub (SPUBLISH) is not used: on Cluster a release's
//     PUBLISH reaches every node.
//   - The scripts compute a slot's fence with Lua numbers (doubles), exact
//     up to 2^53. The semaphore mints its fences from the server clock in
//     µs (about 1.8 × 10^15 now) and writes its counters only itself, so
//     they stay exact; a counter set from outside above 2^53 would not be.
package semaphore
