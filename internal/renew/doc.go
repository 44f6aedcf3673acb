// Package renew renews many held leases in batches: the machine behind a
// Client's auto-renewal, knowing no Client or Lock.
//
// One Renewer serves one owner. It keeps every entry (a lease to renew) in
// a single timer heap, driven by one timer: no goroutine and no timer per
// entry. When an entry's renewal comes due, every entry due within the
// next quarter of its interval (Config.Early) is renewed with it, so that
// entries added at different times fall into step and share calls. Due
// entries are grouped by Group (the owner's node and Cluster slot) and by
// TTL, and sent as one call of the owner's BatchFunc per group and per
// BatchSize entries (default 512): the Redis call itself lives with the
// owner (a script over the keys of one slot). Calls run on at most
// PerNode workers per node, so calls to one node overlap (pipelined
// across groups) and a stalled node holds up only its own entries.
//
// Each entry learns its own outcome. A confirmed renewal moves its
// validity (Entry.Renewed); a renewal that finds the grant gone reports
// the loss at once (Entry.Lost, a cause matching lease.ErrNotHeld); an
// entry whose validity is about to end without a confirmed renewal is
// reported lost lease.LossLead (1% of its TTL, at least 5 ms, at most a
// quarter of its interval) before its ValidUntil (a cause matching
// lease.ErrLeaseExpired, with the last renewal's error), by the timer,
// whatever the calls in flight are doing. Failed renewals are retried,
// more often as the validity runs out.
//
// Handle.Stop ends one entry's renewal; Close ends the Renewer's. The clock
// is injectable (Config.Clock; leasetest.FakeClock in tests).
package renew
