// Package backend is the kit for implementing a lock backend of the lease
// contract, the way database/sql/driver stands beside database/sql:
// package lease is what the users of a backend read, this package what its
// implementer reads.
//
// It holds the rules every backend follows, so that they follow them
// alike: checking input (CheckKey, CheckTTL), a grant's validity
// (ValidUntil, Expired), how long Obtain waits for a held lock
// (WaitDeadline), how a Release ends the renewals of Hold and Run at once
// (ReleaseWatch), and one adapter from a backend's own client to a
// lease.Locker (NewLocker). The rules that lease's own Hold and Run
// follow too are in package lease, where they are written once: the
// errors and how to build them (lease.Invalid, lease.Join, lease.Wrap),
// the options of a call (lease.Apply, lease.CheckHolder,
// lease.CheckRetry), and renewal (lease.Keeper, lease.Refresher,
// lease.Drift, lease.RenewInterval, lease.LossLead); Keeper and Refresher
// are named here too. The Redis client (package redislock) and pglock are
// built on it; lease/leasetest checks the result.
package backend
