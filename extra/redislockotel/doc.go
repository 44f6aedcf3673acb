// Package redislockotel records the events of redislock Clients as
// OpenTelemetry metrics and spans. An Observer is a redislock Observer:
//
//	obs, err := redislockotel.New() // the global MeterProvider and TracerProvider, or WithMeterProvider/WithTracerProvider
//	if err != nil { ... }
//	locker := redislock.New(rdb, redislock.WithObserver(obs))
//
// The pattern packages report to it through their own WithObserver
// options (semaphore.WithObserver(obs), ...): their metrics are named
// redislock.semaphore.*, redislock.leader.*, redislock.dedup.* and
// redislock.stampede.*, and semaphore Acquire calls and stampede fills are
// spans too (redislock.semaphore.acquire, redislock.stampede.fill; the
// fill's own calls join its span).
//
// # Spans
//
// redislock.obtain (with a redislock.wait event when the call waited for a
// held lock), redislock.refresh and redislock.release are children of the
// span in the caller's context: they join the caller's trace. They carry
// redislock.key (unless WithoutSpanKeys), redislock.ttl, redislock.fence,
// redislock.attempts and redislock.outcome or redislock.result; a failed
// call has status Error, and each failed node call is an event. Renewals by
// Run and lease.Hold run on a context of their own and get no span (a root
// span per renewal would be noise); their metrics are recorded all the
// same. No span or metric carries a lock's token.
//
// # Metrics
//
// Durations are in seconds ("s"). The lock key is an attribute only with
// WithKeyAttribute.
//
//	redislock.acquisitions        counter        {acquisition}  redislock.outcome = obtained | contended | error
//	redislock.acquire.duration    histogram      s              from an Obtain call to its return; redislock.outcome
//	redislock.wait.duration       histogram      s              time Obtain calls spent waiting for a held lock; redislock.outcome
//	redislock.waits               counter        {wait}         Obtain calls that found the lock held and waited (contention)
//	redislock.waiting             updowncounter  {call}         Obtain calls waiting now
//	redislock.hold.duration       histogram      s              from a grant's request to its Release; redislock.result
//	redislock.releases            counter        {release}      redislock.result = ok | not_held | error
//	redislock.held                gauge          {lock}         grants obtained, not released, not past their lease
//	redislock.expirations         counter        {lock}         grants that ended without a successful Release
//	redislock.refreshes           counter        {refresh}      redislock.kind = renewal | call; redislock.result
//	redislock.refresh.duration    histogram      s              redislock.kind
//	redislock.losses              counter        {lock}         Run/Hold losses; redislock.reason = not_held | lease_expired
//	redislock.stale_owner         counter        {event}        redislock.op = refresh | release | write
//	redislock.node.failures       counter        {call}         redislock.node (index), redislock.op
//	redislock.resubscriptions     counter        {connection}   replaced pub/sub connections of notified waiting
//	redislock.cleanup.failures    counter        {release}      failed background releases
//
// These are the metrics of extra/redislockprom under OpenTelemetry's
// names; see its documentation for how held locks and expirations are
// tracked.
package redislockotel
