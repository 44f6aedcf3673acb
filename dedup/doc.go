// Package dedup runs a job at most once per id across a pool of workers,
// on any lease.Locker and lease.Store: redislock's Client.Locker and
// Client.Store (single or quorum mode), pglock, or the in-memory
// leasetest.Memory in tests.
//
// A queue that redelivers (at-least-once delivery, retries, a producer that
// sends twice) hands the same job to several workers. Each calls Do with
// the job's id:
//
//	g, err := dedup.New(client.Locker(), client.Store(), dedup.WithHolder(workerName))
//	...
//	res, err := g.Do(ctx, msg.ID, func(ctx context.Context, fence int64) ([]byte, error) {
//		return charge(ctx, msg, fence) // send fence with every write
//	})
//	var busy *dedup.InProgressError
//	switch {
//	case errors.As(err, &busy): // another worker runs it: redeliver after busy.RetryAfter
//	case err != nil: // the job failed, or its outcome is unknown: retry
//	default: // done: here (res.Ran) or earlier; res.Value is its result
//	}
//
// # How it works
//
// Two things keep a job from running twice. The job's lock keeps
// concurrent duplicates out: while one worker runs the job, the others get
// an *InProgressError (or, with WithRetry, wait for the run's outcome). A
// durable record of the outcome, written to the Store with the lock's
// fence when the job returns, keeps later repeats out: they get the stored
// result without running anything, for as long as the record is kept. The
// lock is renewed while the job runs (lease.RunLock), so a long job needs
// no long lease; the lease (WithLease, default 10 s, renewed every 3.3 s)
// only bounds how long a crashed worker's job stays locked before another
// worker may run it.
//
// A queue that redelivers a duplicate should hold it back for the
// *InProgressError's RetryAfter, the running worker's lease left (see
// ExampleInProgressError): delivered again then, the duplicate gets the
// job's outcome, or another RetryAfter while the job still runs, or, if
// the worker crashed, runs the job itself, at most one lease after the
// crash. Delivered again at once, it only asks again and again.
//
// The scope says which outcomes are recorded: UntilDone (the default)
// records successes, so a failed job can run again at once;
// UntilDoneOrFailed records failures too, and repeats get a *FailedError;
// ForPeriod(d) records every outcome for d after the run began. Records
// of the first two are kept for WithRetention (default 24 h).
//
// # Observing
//
// WithObserver reports how each Do ended: ran, duplicate (of a recorded
// value or failure), in progress elsewhere, or an error
// (observe.JobObserver), which the metric adapters (extra/redislockprom,
// extra/redislockotel) count; a Group without observers builds no event.
//
// # Limits
//
// At most once holds for runs that complete under a valid lease. A run
// whose worker crashes, or is paused past its lease (GC, SIGSTOP, a slow
// network), records nothing, and the job runs again once the lease ends:
// whatever the first run did before it stopped is done twice unless the
// job's writes are idempotent or fenced. Send the fence with every write
// and have the resource refuse fences below the newest it has seen
// (lease.Store.Put, redislock.FencedSet, or in SQL "... WHERE fence <=
// $1"): then a paused run that resumes cannot write after its successor
// did. The fence does not undo writes the first run made before its
// successor started; make those idempotent per id (an insert keyed by the
// id) if they must happen once.
//
// Duplicates are recognised by id alone: the same id with a different
// payload gets the first payload's outcome. A recorded outcome is the
// job's whole result, so keep results small (the Store holds them). In
// redislock's quorum mode, a waiting duplicate (WithRetry) finds the end of
// a run by polling, at the poll interval, instead of being woken.
package dedup
