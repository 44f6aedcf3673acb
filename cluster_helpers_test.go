package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redisproc"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// realCluster is a 3-master Redis Cluster with a replica per master,
// shared by the subtests of one test: each subtest uses keys of its own.
type realCluster struct {
	*redistest.Cluster
	rdb *redis.ClusterClient
}

func startRealCluster(t *testing.T) realCluster {
	t.Helper()
	c := redistest.StartCluster(t, redisproc.ClusterConfig{})
	return realCluster{Cluster: c, rdb: c.Client(nil)}
}

// slotOf is the hash slot of a Redis key, as the cluster computes it.
func (rc realCluster) slotOf(t *testing.T, redisKey string) int {
	t.Helper()
	slot, err := rc.Slot(context.Background(), redisKey)
	require.NoError(t, err)
	return slot
}

// masterOf is the master that holds the lock key of key.
func (rc realCluster) masterOf(t *testing.T, key string) *redisproc.Node {
	t.Helper()
	m, err := rc.MasterOf(context.Background(), rc.slotOf(t, redislock.LockKey(key)))
	require.NoError(t, err)
	return m
}

// keysOnMasters returns n lock keys (prefix-i) whose locks live on n
// different masters.
func (rc realCluster) keysOnMasters(t *testing.T, prefix string, n int) []string {
	t.Helper()
	var keys []string
	seen := map[*redisproc.Node]bool{}
	for i := 0; len(keys) < n; i++ {
		require.LessOrEqual(t, i, 100, "no %d keys on distinct masters among 100", n)
		k := fmt.Sprintf("%s-%d", prefix, i)
		if m := rc.masterOf(t, k); !seen[m] {
			seen[m] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// otherMaster returns a master other than m.
func (rc realCluster) otherMaster(t *testing.T, m *redisproc.Node) *redisproc.Node {
	t.Helper()
	ms, err := rc.Masters(context.Background())
	require.NoError(t, err)
	for _, o := range ms {
		if o != m {
			return o
		}
	}
	require.Fail(t, "no other master")
	return nil
}

// replicaOf returns the replica of master m.
func (rc realCluster) replicaOf(t *testing.T, m *redisproc.Node) *redisproc.Node {
	t.Helper()
	rs, err := rc.ReplicasOf(context.Background(), m)
	require.NoError(t, err, "replicas of %s: %v", m.Addr(), rs)
	require.NotEqual(t, 0, len(rs), "replicas of %s: %v, %v", m.Addr(), rs, err)
	return rs[0]
}

// holds reports whether node n itself (not the cluster) holds key's lock
// with token.
func holds(t *testing.T, n *redisproc.Server, key, token string) bool {
	t.Helper()
	v, err := n.Do(context.Background(), "GET", redislock.LockKey(key))
	switch {
	case errors.Is(err, redis.Nil):
		return false
	case err != nil:
		require.Fail(t, fmt.Sprintf("GET on %s: %v", n.Addr(), err))
	}
	s, _ := v.(string)
	return strings.HasPrefix(s, token+":")
}

// pttl is key's lock's remaining TTL on node n itself.
func pttl(t *testing.T, n *redisproc.Server, key string) time.Duration {
	t.Helper()
	v, err := n.Do(context.Background(), "PTTL", redislock.LockKey(key))
	require.NoError(t, err, "PTTL on %s", n.Addr())
	ms, _ := v.(int64)
	return time.Duration(ms) * time.Millisecond
}

// renewedAfter waits until l's validity moves past since: a renewal
// confirmed after since (bounded by d).
func renewedAfter(t *testing.T, l interface{ ValidUntil() time.Time }, since time.Time, d time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return l.ValidUntil().After(since) }, d, 5*time.Millisecond, "a renewal after "+since.Format(time.StampMilli))
}

// schedulerSlack is how late, past ValidUntil, a loss may reach fn's
// context in these tests: the report is due lease.LossLead before
// ValidUntil (tested exactly on a fake clock in package lease), but the
// timer, the cancellation and the AfterFunc that records it run on a
// loaded 2-core machine, six redis-servers beside them, where one -race
// run in eight saw the chain 40 ms late.
const schedulerSlack = 100 * time.Millisecond

// lossWatch records when a context (fn's ctx in Run) is cancelled, and
// the lock's ValidUntil at that moment.
type lossWatch struct {
	ctx   context.Context
	lock  interface{ ValidUntil() time.Time }
	at    time.Time // set before done is closed
	until time.Time // the lock's ValidUntil when the loss was reported (zero once known gone)
	done  chan struct{}
}

func watchLoss(ctx context.Context, l interface{ ValidUntil() time.Time }) *lossWatch {
	w := &lossWatch{ctx: ctx, lock: l, done: make(chan struct{})}
	context.AfterFunc(ctx, func() {
		w.at, w.until = time.Now(), l.ValidUntil()
		close(w.done)
	})
	return w
}

// before waits for the loss and checks that it was reported before the
// last confirmed ValidUntil (validUntil, read once no renewal could be
// confirmed any more, or the lock's at the loss if later: a confirmation
// may have been applied just after the read), with a cause matching want:
// ErrNotHeld for a renewal that found the grant gone, and then not
// ErrLeaseExpired (no report at the expiry with a "not held" renewal
// error), or ErrLeaseExpired.
//
// The wait for the loss ends 5 s past the later of validUntil and the
// lock's ValidUntil: a renewal confirmed after validUntil was read (on a
// loaded machine, while a fault was still being set up) moves the end of
// the lease on, and the loss is due by that end, not by validUntil.
func (w *lossWatch) before(t *testing.T, validUntil time.Time, want error) {
	t.Helper()
	w.wait(t, validUntil)
	if w.until.After(validUntil) {
		validUntil = w.until
	}
	assert.False(t, w.at.After(validUntil.Add(schedulerSlack)), "the loss was reported %v after ValidUntil", w.at.Sub(validUntil))
	cause := context.Cause(w.ctx)
	assert.False(t, !errors.Is(cause, want) || want != redislock.ErrLeaseExpired && errors.Is(cause, redislock.ErrLeaseExpired), "cause of the loss = %v, want %v", cause, want)
}

// wait returns once the loss was reported, failing t if that has not
// happened 5 s past the lease's end (see before).
func (w *lossWatch) wait(t *testing.T, validUntil time.Time) {
	t.Helper()
	for {
		end := validUntil
		if u := w.lock.ValidUntil(); u.After(end) {
			end = u
		}
		timer := time.NewTimer(time.Until(end) + 5*time.Second)
		select {
		case <-w.done:
			timer.Stop()
			return
		case <-timer.C:
		}
		require.True(t, w.lock.ValidUntil().After(end), "the loss was not reported (ValidUntil was %v ago)", time.Since(end))
	}
}
