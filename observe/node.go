package observe

import "context"

// The events of the Redis client's machinery: node calls, the
// subscription connection of notified waiting, background clean-up.

// NodeObserver is told about every failed call to a Redis node (in quorum
// mode, the node's availability).
type NodeObserver interface {
	NodeFailed(ctx context.Context, e NodeEvent)
}

// NodeEvent is one failed node call: Node is the node's index (0 in single
// mode), Op the operation ("obtain", "refresh", "release", "ttl",
// "inspect", "record", ...), Err a *redislock.NodeError.
type NodeEvent struct {
	Node int
	Op   string
	Err  error
}

// SubscriptionObserver is told when the subscription connection of
// notified waiting failed and is being replaced (waiters fall back to their
// backoff meanwhile).
type SubscriptionObserver interface {
	Resubscribed(e SubscriptionEvent)
}

// SubscriptionEvent is a replaced subscription connection and why.
type SubscriptionEvent struct {
	Err error
}

// CleanupObserver is told when a background clean-up (the release of a
// grant whose outcome was unknown, of a late or partial quorum grant, of a
// handoff nobody took) failed or could not run: that grant may stay on
// Redis until its TTL.
type CleanupObserver interface {
	CleanupFailed(ctx context.Context, e CleanupEvent)
}

// CleanupEvent is one failed clean-up.
type CleanupEvent struct {
	Key  string
	Node int
	Err  error
}

// EvictionObserver is told when a Redis server of the Client can evict
// lock keys: the Client reads each server's maxmemory-policy (INFO
// memory) once, in the background, after its first call on the node, and
// tells of each server whose policy is not noeviction. Under memory
// pressure such a server deletes keys with a TTL, lock keys among them (a
// volatile-* policy evicts only those, so beside application data without
// TTL, lock keys are the first to go): a held lock vanishes and is granted
// to another caller while its holder believes it valid. A server that
// refuses INFO is not reported. See docs/redis-deployments.md.
type EvictionObserver interface {
	EvictionPolicy(e EvictionEvent)
}

// EvictionEvent is a server whose eviction policy can evict lock keys:
// Node is the node's index (0 in single mode), Addr the server (a
// Cluster's or a Ring's shard; "" for the master of a Sentinel failover
// client), Policy its maxmemory-policy ("allkeys-lru", "volatile-ttl",
// ...), MaxMemory its maxmemory in bytes (0: no limit set yet; eviction
// starts once one is).
type EvictionEvent struct {
	Node      int
	Addr      string
	Policy    string
	MaxMemory int64
}
