package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
)

// WithReplicas makes each grant and each refresh wait until at least k
// replicas of the Redis that granted it have acknowledged it, at most
// timeout: a WAIT k timeout on the same connection, right after the
// script (WAIT cannot run inside a script). Default: off (k = 0, no
// WAIT). k must not be negative; with k > 0 the timeout must be at least
// 1 ms (WAIT 0 would block for ever). WAIT never outlives the call's
// context nor the lease it protects: it waits at most the timeout, and
// ends early enough (a tenth of the validity left, at least 200 ms, since
// an idle Redis ends a WAIT up to a cron tick late) for its answer to come
// while the lease and the context last.
//
// A grant that fewer than k replicas acknowledged in time is released and
// never returned: Obtain fails with a *ReplicaError matching
// ErrNotReplicated (the lock may be free again). A Refresh that fewer than
// k acknowledged returns that error and leaves ValidUntil as it was (the
// primary did extend the lease); a renewal by Run or lease.Hold that is
// not acknowledged counts as failed and is retried, and if none is
// acknowledged before ValidUntil the lock is reported lost
// (ErrLeaseExpired, joined with the ReplicaError).
//
// What it protects against, and what not: see docs/redis-deployments.md in
// the repository. It is single-mode only (standalone, Sentinel, Cluster):
// quorum mode, a *redis.Ring and ObtainMulti refuse it (errors matching
// ErrInvalidArgument). The time WAIT takes comes out of the grant's
// validity, which still starts when the request began. A waiter that asks
// for replicas is never handed the lock by a Release of its Client (see
// the package guide, Handoff): it takes it itself, and waits for them.
func WithReplicas(k int, timeout time.Duration) Option {
	return optionFunc(func(o *options) {
		switch {
		case k < 0:
			o.fail(invalid("replicas %d is negative", k))
			return
		case k > 0 && timeout < time.Millisecond:
			o.fail(invalid("replica timeout %v is below 1ms", timeout))
			return
		}
		o.replicas, o.replicaTimeout = k, timeout
	})
}

// renewAcked runs the batches (WithReplicas o) on one connection per
// server that serves them now (the master of their slots on Cluster),
// each server's followed by one WAIT, and returns per batch the
// *NodeError of a WAIT that too few replicas answered (nil:
// acknowledged). A batch whose server failed gets the error (none of that
// server's renewals is acknowledged).
func (s *single) renewAcked(ctx context.Context, batches []script.Batch, ttl time.Duration, o *options) (unacked []error) {
	sent := time.Now()
	until := o.validUntil(sent, ttl) // of the renewals, sent from now
	unacked = make([]error, len(batches))
	firsts := make([]string, len(batches))
	for i, b := range batches {
		firsts[i] = b.Keys[0]
	}
	errs := s.n.OnConns(ctx, firsts, func(conn *redis.Conn, is []int) error {
		for _, i := range is {
			b := &batches[i]
			if b.Status, b.Err = script.BatchRefresh(ctx, conn, b.Keys, b.Tokens, ttl.Milliseconds(), nil); b.Err != nil {
				return b.Err
			}
		}
		return awaitReplicas(ctx, conn, o, sent, until)
	})
	for i, err := range errs {
		var re *ReplicaError
		switch {
		case errors.As(err, &re):
			unacked[i] = s.c.nodeErr(ctx, s.n.Index, "refresh", err)
		case err != nil: // no WAIT ran: none of the server's renewals is acknowledged
			batches[i].Err = err
		}
	}
	return unacked
}

// waitLate is how late Redis may end a WAIT, with room to spare: an idle
// Redis checks blocked clients' timeouts at its cron ticks, 1/hz apart
// (100 ms at the default hz 10); two ticks.
const waitLate = 200 * time.Millisecond

// awaitReplicas runs WAIT on conn, after the write that o's grant or
// refresh, sent at sent, made there, for the lease valid until until: nil
// when enough replicas acknowledged it in time, a *ReplicaError when too
// few did, or WAIT's own error. WAIT waits the replica timeout, but never
// past ctx's deadline, nor past until less the largest of a tenth of the
// validity left, the write's round trip (its reply takes as long) and
// waitLate, so that its answer comes while the lease is valid (a lease
// already over needs no replicas). With less than 1 ms left for it, it
// does not wait at all: WAIT 0 0 counts the replicas that have
// acknowledged so far (a WAIT k 0 would block for ever, a WAIT k 1 may
// end a cron tick late).
func awaitReplicas(ctx context.Context, conn *redis.Conn, o *options, sent, until time.Time) error {
	left := time.Until(until)
	d := min(o.replicaTimeout, left-max(left/10, time.Since(sent), waitLate))
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)-waitLate)
	}
	d = max(d.Truncate(time.Millisecond), 0)
	want := o.replicas
	if d == 0 {
		want = 0 // no time to wait: count the acknowledgements so far
	}
	n, err := nodes.Wait(ctx, conn, want, d.Milliseconds())
	switch {
	case err != nil:
		return err
	case n < o.replicas:
		return &ReplicaError{Want: o.replicas, Acked: n, Timeout: d}
	}
	return nil
}
