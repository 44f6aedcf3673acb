// Package redislock provides distributed locks on Redis: leases taken and
// given back by atomic Lua scripts, a fencing token minted with every
// grant, renewal that tells the holder the moment its lock is lost, fast
// and fair waiting, and a quorum (Redlock) mode over N independent Redis
// masters. It works with standalone Redis, Sentinel and Cluster through any
// redis.UniversalClient of go-redis v9.
//
//	client := redislock.New(rdb)
//	defer client.Close()
//	lock, err := client.Obtain(ctx, "report", 10*time.Second)
//	if errors.Is(err, redislock.ErrNotObtained) {
//		return // someone else holds it
//	}
//	defer lock.Release(ctx)
//
// The Client is also a lease.Locker (Client.Locker) and a lease.Store of
// fenced records (Client.Store), the contract that the pattern packages
// (leader, dedup, stampede, semaphore) and the PostgreSQL backend share.
//
// # Leases and fences
//
// A lock is a lease: it ends at its TTL whether or not its holder is done.
// Obtain returns a grant only while it is valid, and Lock.ValidUntil is the
// holder's conservative view of its lease: the start of the request that
// confirmed it, plus the TTL, less drift (TTL × 0.01 + 2 ms by default, see
// WithDriftFactor), on Go's monotonic clock.
//
// A holder paused past its lease (GC, SIGSTOP, a slow network, a VM
// migration) still believes it holds the lock while another client holds it
// too. Run cancels its work's context at ValidUntil at the latest, but a
// write already in flight still lands. Only the protected resource can
// refuse it: send Lock.Fence with every write and have the resource refuse
// fences below the newest it has accepted. FencedSet and Client.Store do
// that on Redis, FenceGate in a Go process; in SQL it is one statement:
//
//	UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2
//
// and zero rows updated means the writer's lock was superseded.
//
// # Fences
//
// A lock is one Redis key, "<prefix>{<key>}": its grant while held, then a
// released record that keeps the last fence for the lock's TTL (at least
// the release timeout, default 3 s) after Release, and nothing after that. In single mode the
// first fence of a key is the server's clock in µs, each later one the last
// fence + 1, read from the grant or the released record. A key is granted
// far less often than once per µs, so its fences stay below the clock, and
// a fence minted from the clock once the key is gone (its record expired,
// a restart without persistence, FLUSHALL, eviction) is still higher than
// every earlier one, as long as the server's clock did not step back by
// more than the time since the key's last grant. Quorum mode: see below.
//
// # Waiting
//
// By default Obtain tries once. With WithRetry it waits while the lock is
// held, until the strategy gives up, the context ends, or, for a context
// without deadline, the wait limit passes (WithMaxWait, default 30 s: a
// cap, no attempt starts after it); then it returns ErrNotObtained, also
// matching the context's error when that ended the wait, or a
// *WaitLimitError with the remaining TTL seen at the limit.
//
// Waiting is notified (WithNotify, on by default): a release publishes a
// wake-up on the lock's channel in the same script that deletes the lock,
// if an attempt found the lock held. A waiter whose attempt failed
// subscribes, waits for Redis to confirm, tries once more (so that a
// release in between is not missed), then waits for the first of: a
// wake-up, its backoff, the remaining TTL its attempt saw (an expiry
// publishes nothing), or the end of its context. The backoff stays the
// upper bound of every wait, so a lost message or a dead subscription
// connection costs at most one backoff. All waiters of a Client share one
// subscription connection, and each release wakes one waiter per Client,
// not all, so a hot key does not cause a stampede of attempts.
//
// Within a Client, callers waiting for a key form a queue: a new caller
// that finds others waiting queues behind them, only the longest-waiting
// one makes attempts, and callers are granted in arrival order.
//
// # Handoff
//
// When a Lock is released while other callers of the same Client wait for
// its key, Release hands the lock straight to the longest-waiting one: the
// release's one script call checks the releaser's token, releases its
// grant and grants the waiter's fresh token with the waiter's TTL and the
// next fence, atomically. The waiter gets its Lock without a round trip of
// its own, so a hot key shared by the goroutines of one process costs one
// Redis call per grant. Waiters of other Clients see the lock held
// throughout; so that they are not starved, a chain of handoffs ends after
// 16, and that release is an ordinary one that wakes every Client. Where
// Redis refuses to write the waiter's grant (maxmemory with noeviction),
// the release frees the lock all the same and the waiter tries on its own.
//
// # Fair locks
//
// WithFair(true) grants in arrival order across Clients. A fair Obtain that
// finds the lock held, or free but due to an earlier waiter, joins a queue
// kept on Redis next to the lock ("<prefix>{key}:queue" and ":qexp"); the
// lock is granted only to the head of the queue, in the same script that
// checks it, and a release names the head in its wake-up. Queue entries
// expire WithQueueTTL (default 3 s) after their waiter last tried, so a
// waiter that died holds up the queue for at most that long; fair waiters
// therefore try at least every third of it, whatever their backoff. A
// server clock stepped back adds at most the time between two attempts,
// not the step; one stepped forward costs a live waiter its place, never
// the lock's exclusion (docs/limitations.md, Clocks).
//
// Fairness costs: a larger script on every attempt, a queue read on every
// release, and the lock stays free between a release and the head's next
// attempt even when someone else could have taken it. Unfair Obtain calls
// on the same key ignore the queue and may overtake it: use one mode per
// key.
//
// # Several keys
//
// ObtainMulti holds several keys as one lock, all or nothing, with a fence
// per key. On one Redis one atomic script takes every key. On Cluster each
// key has a hash tag of its own (braces inside a key do not choose its
// slot), so it takes them one slot at a time in a canonical order and gives
// back what it took before waiting, so that no one waits while holding.
//
// # Run and renewal
//
// Run obtains a lock, renews it every WithRefreshInterval (default TTL/3)
// while fn runs, and releases it when fn returns or panics. If a renewal
// finds the lock gone, or renewals cannot get through before ValidUntil,
// fn's context is cancelled no later than the last confirmed ValidUntil and
// Run returns an error matching ErrLockLost; context.Cause tells why (a
// cause matching ErrNotHeld, or ErrLeaseExpired with the last renewal's
// error). A Release of the lock while fn runs (fn called l.Release) gives
// it up early: fn's context is cancelled at once, its cause ErrReleased, and
// Run does not release again and returns an error matching ErrReleased
// (with fn's own), since what fn did after the Release ran without the
// lock. When the lock is known lost or Redis is unreachable as fn
// returns, the release goes to the background (Close waits for it) and Run
// returns at once. To hold a lock outside a callback, use lease.Hold: its
// Done channel closes the moment the lock is lost. In single mode the locks a
// Client holds this way share one renewer: one timer heap and one script
// call for up to 512 locks due together (per slot on Cluster, pipelined per
// master), each lock still told of its own loss; quorum mode renews each
// lock on its own.
//
// # Replica acknowledgement
//
// WithReplicas(k, timeout) makes each grant and refresh wait, with WAIT on
// the granting connection, until k replicas acknowledged it; a grant they
// did not acknowledge in time is released and returned as a *ReplicaError
// (ErrNotReplicated). It narrows, but does not close, the window in which
// a failover loses a lock: WAIT is no consensus, and a failover may promote
// a replica that did not acknowledge.
//
// # Quorum mode
//
// NewQuorum takes each lock on a majority (N/2+1) of N independent masters.
// Obtain asks all nodes in parallel, each request bounded by the node
// timeout (WithNodeTimeout; default TTL/10, at least 50 ms), and returns as
// soon as a majority granted, with validity = TTL - elapsed - drift. Nodes
// that answer later are dealt with in the background: a late grant, even one
// after the node timeout, is kept as part of the lock, and so is a node
// whose call failed (it may hold the grant); the validity never counts
// them. Without a valid majority it releases on every node that granted or
// did not answer, then retries or fails: ErrNoQuorum when fewer than a
// majority answered, ErrNotObtained when a majority answered but other
// holders denied the grant (both as a *QuorumError with each failing
// node's *NodeError). Refresh, TTL and Release decide at the majority too
// and return; the other nodes finish in the background (Close waits for
// them), so a dead or stalled minority slows none of them.
//
// A grant often rests on a bare majority: the other nodes were down or
// slow, or went to a contender. Refresh (and so Run's renewals) extends
// the nodes that hold the grant and brings the others into it where their
// key is free (never another holder's), so the lock survives one minority
// outage after another. A node a refresh takes counts towards its majority
// at once if the lock is still valid and no attempt after the grant's
// reached the node, else from the next refresh on; a refresh after the
// validity ended counts only the nodes that kept the grant, so ownership
// never looks continuous across a gap. Release goes to every node that
// holds the grant or may; one whose obtain or join answers after the
// Release is released then, so that a release never reaches a node before
// its grant.
//
// One node's clock stepping forward past the TTL (Redis expires keys on
// its wall clock) is outvoted only while more than a bare majority holds
// the grant: on a bare majority, the stepped node and a node that missed
// the grant can make a second majority, and two clients hold the lock
// (their fences stay ordered) until the holder's next refresh after that
// node came back has brought it in. A lock held without refreshes stays
// on the nodes that granted it.
//
// Quorum fences are strictly increasing and unique per key, under these
// assumptions: two granting majorities share a node, and that node still
// has the lock's key (a grant, or a released record, which lives the
// lock's TTL, at least the release timeout, after its release); for grants further
// apart than that, the proposing client's clock is not behind the earlier
// holder's by more than the time between them. Each attempt proposes one
// fence, above the client's clock in µs and above every fence it has seen;
// each node, in the same atomic script as the grant, accepts it only if it
// is above the last fence its key holds, else answers that fence so that
// the attempt is proposed again, higher. A node that restarts empty forgets
// its counters and its locks: two clients may then hold a majority at once
// (a double grant); the fences keep ordering the grants as long as no two
// shared nodes of consecutive majorities lost data.
//
// Run the nodes with appendonly yes and appendfsync always, or restart a
// crashed node only after the longest TTL in use has passed, so that it
// cannot grant a lock that a majority still holds elsewhere. Quorum mode
// has no pub/sub: callers of one Client queue for a key, but releases by
// other Clients are found by polling.
//
// # Options
//
// Every package of the repository names one concept by one option, so that
// what is learnt on one carries to the next:
//
//	option               concept                 packages
//	WithPrefix           key namespace           redislock, stampede, dedup, leader, semaphore
//	WithHolder           holder identity         redislock, lease, pglock, stampede, dedup, leader, semaphore
//	WithRetry            waiting for a held lock redislock, lease, pglock, stampede, dedup, leader
//	WithMaxWait          the cap on that wait    redislock, pglock
//	WithRefreshInterval  renewal                 redislock, lease, pglock, dedup, leader
//	WithDriftFactor      clock drift             redislock, pglock, semaphore, lease/leasetest
//	WithLease            a pattern's lock TTL    stampede, dedup, leader
//	WithClock            time source in tests    dedup, leader, lease/leasetest
//
// pglock keeps its locks in a table (WithTable) rather than under a prefix;
// stampede renews a fill's lock every third of its lease. The adapters of
// extra/ configure metrics and traces, not locks: their names are those of
// Prometheus and OpenTelemetry (redislockprom.WithNamespace is a metric
// namespace). The CHANGELOG lists the names these replaced.
//
// # Observing
//
// WithObserver installs an Observer, any value implementing one or more of
// the event interfaces of package observe (ObtainObserver, RefreshObserver,
// ReleaseObserver, LossObserver, ...); extra/redislockprom and
// extra/redislockotel are Observers for Prometheus and OpenTelemetry.
// WithLogger logs the same events to a *slog.Logger (observe.NewLogger). A
// Client without either pays nothing for them.
//
// # Errors
//
// Contention is ErrNotObtained and never stands for an unreachable Redis;
// Redis failures are *NodeError values (in quorum mode joined in a
// *QuorumError); when no call reached a node, the error says why, whatever
// the TTL (the dial's error, a server that does not answer); a grant that
// is gone is ErrNotHeld; work that lost its lock is ErrLockLost, work whose
// lock was released under it ErrReleased; bad input is ErrInvalidArgument,
// reported before anything is sent. The shared sentinels are package
// lease's, so errors.Is matches across backends.
//
// # Limits
//
// A Redis lease lock is mutual exclusion for cooperating, timely clients,
// not a consensus protocol. A failover to a replica that had not received
// the lock grants it again; Redis expires keys on its wall clock, so a
// server clock that jumps forward expires locks early (and semaphore
// permits: more than N may then be valid at once; in quorum mode one
// node's jump is enough while a grant rests on a bare majority); under an
// evicting maxmemory policy Redis may evict a lock (Refresh then reports
// ErrNotHeld; the Client warns once per such server through WithLogger and
// observe.EvictionObserver). Use fences where correctness matters. A call
// on a context that can end returns by its deadline even against a
// stalled server, whatever go-redis' options (ContextTimeoutEnabled); one
// on context.Background() is left to go-redis' own timeouts.
// docs/limitations.md in the repository lists every limitation.
package redislock
