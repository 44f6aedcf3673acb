// Package lease is the contract that every lock backend of this project
// implements and that the patterns built on locks (leader election,
// per-job deduplication) are written against: a Locker that grants leases,
// the Lock it returns, a Store of fenced records, the errors they share,
// Hold and Run, written once for every backend, and Key, which makes a
// pattern's keys from its prefix and an id without ambiguity.
//
// It imports nothing from the rest of the repository and no backend's
// driver. The Redis client (redislock.Client.Locker) and the PostgreSQL
// backend (pglock) implement it with the kit of lease/backend, which
// stands beside this package as database/sql/driver stands beside
// database/sql; lease/leasetest holds the conformance suite they all pass
// and an in-memory Locker with an injectable clock, for fast and
// deterministic tests of code built on locks.
//
// # Renewal
//
// Hold and Run renew a Lock until its holder is done. A Lock that is also
// a Keeper renews itself (in batches, on a clock of its own), found by a
// type assertion as io.Copy finds an io.WriterTo; any other Lock is
// renewed by a Refresher, one Refresh per interval. The rules both follow
// are here, where Hold and Run need them, and backends use them too:
// RenewInterval (how often), Drift (what a validity gives up) and LossLead
// (how early a loss is reported). So are the options of a call (Options,
// Apply, CheckHolder, CheckRetry) and the way errors are built (Invalid,
// Join, Wrap).
//
// # Leases and fences
//
// A lease ends at its TTL whether or not its holder is done: a holder paused
// past its lease (GC, SIGSTOP, a slow network) still believes it holds the
// lock while another does. Lock.ValidUntil is the holder's conservative view
// of its lease, and Hold and Run cancel the holder's context at that time at
// the latest. Only the protected resource can refuse a stale holder's write
// that is already in flight: send Lock.Fence with every write and have the
// resource refuse fences below the newest it has accepted (Store.Put does
// that for records; in SQL, "UPDATE ... SET ..., fence = $1 WHERE id = $2
// AND fence <= $1").
//
// # Errors
//
// Contention is ErrNotObtained, never an unreachable backend; a grant that
// is gone is ErrNotHeld; work that lost its lock is ErrLockLost, work whose
// lock was released under it ErrReleased; bad input is ErrInvalidArgument.
// Backends wrap these (errors.Is matches across backends) and keep a
// context's error next to them.
package lease
