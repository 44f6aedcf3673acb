// Package redislockprom exports the events of redislock Clients as
// Prometheus metrics: a Collector is both a redislock Observer and a
// prometheus.Collector.
//
//	col, err := redislockprom.New()
//	if err != nil { ... }
//	prometheus.MustRegister(col)
//	locker := redislock.New(rdb, redislock.WithObserver(col))
//
// # Metrics
//
// Names follow the Prometheus conventions: base units (seconds), _total
// for counters only. Labels have small, fixed value sets; the lock key is a
// label only with WithKeyLabel, and no metric ever carries a lock's token.
//
//	redislock_acquisitions_total{outcome}            counter   Obtain calls: outcome = obtained | contended | error
//	redislock_acquire_duration_seconds{outcome}      histogram from an Obtain call to its return
//	redislock_wait_duration_seconds{outcome}         histogram time Obtain calls spent waiting for a held lock
//	redislock_waits_total                            counter   Obtain calls that found the lock held and waited (contention)
//	redislock_waiting_calls                          gauge     Obtain calls waiting now
//	redislock_hold_duration_seconds{result}          histogram from a grant's request to its Release
//	redislock_releases_total{result}                 counter   Release calls: result = ok | not_held | error
//	redislock_held_locks                             gauge     grants obtained, not released, not past their lease
//	redislock_expirations_total                      counter   grants that ended without a successful Release
//	redislock_refreshes_total{kind,result}           counter   kind = renewal (Run, lease.Hold) | call; result = ok | not_held | error
//	redislock_refresh_duration_seconds{kind}         histogram time a Refresh took
//	redislock_locks_lost_total{reason}               counter   Run/Hold losses: reason = not_held | lease_expired
//	redislock_stale_owner_total{op}                  counter   a holder acting after its grant ended: op = refresh | release | write
//	redislock_node_failures_total{node,op}           counter   failed calls per Redis node (index in the NewQuorum list; 0 in single mode)
//	redislock_node_last_failure_timestamp_seconds{node} gauge  Unix time of a node's last failed call
//	redislock_resubscriptions_total                  counter   replaced pub/sub connections of notified waiting
//	redislock_cleanup_failures_total                 counter   failed background releases
//
// The pattern packages report to the same Collector through their own
// WithObserver options (semaphore.WithObserver(col), ...):
//
//	redislock_semaphore_acquisitions_total{outcome}  counter   semaphore Acquire and TryAcquire calls
//	redislock_semaphore_acquire_duration_seconds{outcome} histogram from an Acquire call to its return
//	redislock_semaphore_waiting_calls                gauge     Acquire calls waiting in the queue now
//	redislock_semaphore_held_permits                 gauge     permits acquired, not released, not past their lease
//	redislock_semaphore_refreshes_total{result}      counter   permit renewals
//	redislock_semaphore_releases_total{result}       counter   permit releases
//	redislock_leader_terms_total                     counter   terms of leadership won: elections
//	redislock_leader_term_ends_total{reason}         counter   terms ended: reason = resigned | lost
//	redislock_leader_leading                         gauge     terms held now
//	redislock_leader_term_duration_seconds{reason}   histogram how long terms lasted
//	redislock_dedup_jobs_total{outcome}              counter   dedup Do calls: outcome = ran | duplicate | in_progress | error
//	redislock_dedup_job_duration_seconds{outcome}    histogram from a Do call to its return
//	redislock_stampede_requests_total{result}        counter   stampede Do calls: result = hit | filled | waited | error
//	redislock_stampede_fills_total{kind,result}      counter   fills: kind = fill | refresh; result = ok | error
//	redislock_stampede_fill_duration_seconds{kind}   histogram time a fill took
//
// A Grafana dashboard and Prometheus alert rules for these metrics are in
// the repository's extra/redislockprom/monitoring.
//
// Failed renewals are redislock_refreshes_total{kind="renewal",result!="ok"}.
// redislock_held_locks and redislock_expirations_total track each grant
// by its key and fence from Obtain to Release: a grant leaves the held set
// once, released or expired (its lease ran out, found at a scrape, or a
// Refresh or Release found it gone, or Run or Hold lost it). ObtainMulti's
// grants are counted in redislock_acquisitions_total but not held: a
// MultiLock reports no fence and no release to observers.
//
// The Collector costs an Obtain one small allocation (the state of the call
// in its context) and a few atomic additions; see the package benchmark.
package redislockprom
