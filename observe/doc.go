// Package observe is what a lock's life looks like from outside: the events
// of the Redis client (package redislock) and the interfaces an Observer
// implements to hear them, the way net/http/httptrace stands beside
// net/http. The metric and trace adapters (extra/redislockprom,
// extra/redislockotel) are written against this package alone, and so is
// the slog adapter here (NewLogger). RedisLogger routes go-redis' own log
// lines through slog too, or drops them.
//
// # Observers
//
// An Observer is any value that implements one or more of the event
// interfaces: ObtainObserver, WaitObserver, RefreshObserver,
// ReleaseObserver, LossObserver, NodeObserver, SubscriptionObserver,
// CleanupObserver, StaleFenceObserver, EvictionObserver. Give it to
// redislock.New or redislock.NewQuorum with redislock.WithObserver. The
// metric and trace adapters leave EvictionObserver to the logger: a
// warning once per server is no metric. An event source finds the
// interfaces once, when it is configured (Select), so a source without
// observers, or with none for an event, pays nothing for that event: it
// does not even build it.
//
// New events come as new interfaces, found by type assertion as pgx finds
// the methods of its tracers: an Observer written today keeps compiling
// and is simply not told of events it has no method for.
//
// # The pattern packages
//
// The pattern packages report their events the same way, each through its
// own WithObserver option: semaphore to AcquireObserver, QueueObserver and
// PermitObserver (permits held and waiting), leader to TermObserver
// (elections won, terms ended), dedup to JobObserver (ran, duplicate, in
// progress), stampede to CacheObserver (hits, fills, waits) and
// FillObserver (fills and their failures). The metric and trace adapters
// implement them all, so one adapter can observe a Client and its
// patterns. The slog adapter (NewLogger) logs the Client's events only.
//
// # Rules for Observers
//
// Methods are called synchronously, on the goroutine where the event
// happens, so they must be quick and must not call back into the source.
// A Start method returns the context the operation goes on with (a span's,
// say), which the matching Done method gets. No event carries a lock's
// token.
package observe
