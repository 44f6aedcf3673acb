// Package leader elects one leader among candidates on any lease.Locker:
// redislock's Client.Locker (single or quorum mode), pglock, or the
// in-memory leasetest.Memory in tests.
//
// Each candidate makes an Election with the same name and its own identity
// and campaigns; the one that holds the election's lock leads, for one
// Term, until it resigns or loses the lock:
//
//	e, err := leader.New(client.Locker(), "billing-scheduler", leader.WithHolder(podName))
//	...
//	err = e.Run(ctx, leader.Callbacks{
//		OnStartedLeading: func(ctx context.Context, t *leader.Term) error {
//			return schedule(ctx, t.Fence()) // until ctx ends
//		},
//		OnNewLeader: func(id string) { log.Printf("leader: %s", id) },
//	})
//
// Campaign, Term.Resign (or Election.Resign), Leader and Observe are the
// parts Run is made of, for callers that want them apart.
//
// # Guarantees
//
// The leader's context (Term.Context, and the ctx OnStartedLeading gets)
// is cancelled when its term ends, and at the latest a margin
// (WithMargin, default a tenth of the lease) before the validity its lock
// last confirmed, which is itself the lease less clock drift: before the
// backend can let another candidate win. A term is a lock grant, so
// Term.Fence, the term number, is strictly greater than every earlier
// term's of the election, across every candidate and process; send it with
// the leader's writes and have the resource refuse lower ones
// (lease.Store.Put, redislock.FencedSet, or in SQL "... WHERE fence <= $1").
// Run waits for the leader's work to return before it gives the lock back,
// and Resign wakes the waiting candidates at once on a backend that
// notifies waiters (redislock in single mode, leasetest.Memory). Every
// default is in the Default constants; invalid options are errors.
//
// # Observing
//
// WithObserver reports each term this candidate wins (an election) and
// how it ends, resigned or lost (observe.TermObserver), whatever ends it;
// Resign returns after the end was reported. The metric adapters
// (extra/redislockprom, extra/redislockotel) count them and the terms led
// now; an Election without observers builds no event.
//
// # Limits
//
// The context is a signal, not a stop: a leader paused (GC, SIGSTOP, a
// slow network) past its lease cannot know its term is over, and keeps
// going when it resumes until it notices. Only fences refused by the
// resource protect against its late writes. The margin and the lease's
// drift assume the candidates' clocks run at about the same rate (not
// that they agree on the time).
//
// A crashed or partitioned leader is replaced one lease after its last
// renewal, not sooner: the backend must let its lease run out. In
// redislock's quorum mode, which has no wake-up across clients, a
// resignation is found by the waiting candidates' polling, up to one backoff
// of the retry strategy (WithRetry) later.
//
// Leader and Observe ask the backend (the Locker's Inspect); Observe polls
// at the observe interval (WithObserveInterval), so it can miss a term
// shorter than that, and it reports what the backend said when it asked:
// by the time a value is read another candidate may lead.
package leader
