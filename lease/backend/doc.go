// Package backend is the kit for implementing a lock backend of the lease
// contract, the way database/sql/driver stands beside database/sql:
// package lease is what the users of a backend read, this package what its
// implementer reads.
//
// It holds the rules every backend follows, so that they follow them
// alike: reading the options of a call (Apply), checking input (CheckKey,
// CheckTTL, CheckHolder, CheckRetry, Invalid), a grant's validity (Drift,
// ValidUntil), how long Obtain waits for a held lock (WaitDeadline), how a
// held lock is renewed (Keeper, Keeping, Refresher, RenewInterval,
// LossLead), and one adapter from a backend's own client to a
// lease.Locker (NewLocker). The Redis client (package redislock) and
// pglock are built on it; lease/leasetest checks the result.
package backend
