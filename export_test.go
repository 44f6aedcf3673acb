package redislock

import (
	"time"

	"github.com/redislock-go/redislock/internal/keys"
)

// LocalWaiters reports how many callers of c wait, notified, for key, and
// whether their channel's subscription is confirmed (for tests that must
// order callers).
func LocalWaiters(c *Client, key string) (n int, ready bool) {
	w := c.localWaker()
	if w == nil {
		return 0, false
	}
	return w.Waiting(keys.New(c.opts.prefix, key).Wake)
}

// Handoffs reports how many handoffs in a row led to l's grant (0: l was
// granted by an attempt of its own).
func Handoffs(l *Lock) int { return l.handoffs }

// LockKey is the Redis key of the lock on key with the default prefix.
func LockKey(key string) string { return keys.New(DefaultPrefix, key).Lock }

// EvictionChecked is closed once c's node i has read its servers'
// eviction policies and told the observers (after its first call).
func EvictionChecked(c *Client, i int) <-chan struct{} { return c.set.Nodes[i].PolicyChecked() }

// InFlight reports the fan-out and clean-up calls in flight to node i.
func InFlight(c *Client, i int) (fanned, cleaning int) { return c.set.Nodes[i].InFlight() }

// RecordTTL is the lifetime of a released lock's record, for a lock of
// ttl and a release timeout.
func RecordTTL(ttl, releaseTimeout time.Duration) time.Duration {
	return time.Duration(recordTTL(ttl, releaseTimeout, nil).(int64)) * time.Millisecond
}

// Renewing reports how many locks c's renewer renews (0 before its first
// Keep).
func Renewing(c *Client) int {
	c.mu.Lock()
	rn := c.rn
	c.mu.Unlock()
	if rn == nil {
		return 0
	}
	return rn.Len()
}

// Pipelined reports whether c's node has set up auto-pipelining.
func Pipelined(c *Client) bool { return c.set.Nodes[0].Pipelined() }

// Deferring reports whether c's node batches Obtain and Release calls
// through go-redis' deferred AutoPipeliner, waiting on their callers'
// goroutines.
func Deferring(c *Client) bool { return c.set.Nodes[0].Deferring() }

// Abandoned reports how many calls c's node has abandoned that have not
// yet returned and been settled.
func Abandoned(c *Client) int { return c.set.Nodes[0].Guarded.Abandoned() }

// WithWallClock sets the wall clock a quorum Client proposes fences from.
func WithWallClock(now func() time.Time) ClientOption { return withWallClock(now) }

// NodeSettled reports whether quorum lock l knows the outcome of node i's
// obtain (its answer came, however late).
func NodeSettled(l *Lock, i int) bool {
	g := l.grant
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state[i] != nodePending
}
