package nodes

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A node's eviction policy. Redis under maxmemory evicts keys by its
// maxmemory-policy: every policy but noeviction evicts keys that carry a
// TTL, and every lock key carries one, so a lock can vanish while its
// holder believes it valid and be granted to another. Once the first call
// that reaches a node (Node.Call, Node.Do) has returned, the node's
// servers' policies are read once, in the background, by INFO memory
// (which works where CONFIG GET is refused; every shard of a Cluster or
// Ring), and each server whose policy evicts is reported to the evicting
// function given to New. A server that refuses INFO, or fails to answer
// it within policyTimeout, is not reported, and no caller sees an error
// of it. Starting after the first call keeps it from slowing that call.

// policyTimeout bounds the INFO of a node's eviction check.
const policyTimeout = 5 * time.Second

// Policy is the eviction policy of one server, as INFO memory reports it.
type Policy struct {
	Addr      string // the server's address
	Name      string // maxmemory_policy: "noeviction", "allkeys-lru", "volatile-ttl", ...
	MaxMemory int64  // maxmemory, in bytes; 0: no limit set (eviction starts once one is)
}

// Evicts reports whether the policy lets Redis evict keys that carry a TTL:
// every policy but noeviction (volatile-* ones evict only such keys).
func (p Policy) Evicts() bool { return p.Name != "" && p.Name != "noeviction" }

// policyCheck is a node's once-only check of its servers' policies.
type policyCheck struct {
	evicting func(Policy) // nil: no check
	once     sync.Once
	ctx      context.Context // ended by Node.Close
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	done     chan struct{} // closed when the check has ended, or was not made
}

// checkPolicy starts the node's check of its servers' policies, the first
// time it is called (later calls do nothing).
func (n *Node) checkPolicy() {
	pc := &n.policy
	pc.once.Do(func() {
		if pc.evicting == nil || n.Kind == Other {
			close(pc.done)
			return
		}
		pc.wg.Go(func() {
			defer close(pc.done)
			ctx := Bounded(pc.ctx)
			for _, p := range n.policies(ctx) {
				if p.Evicts() {
					pc.evicting(p)
				}
			}
		})
	})
}

// PolicyChecked is closed once the node's eviction check has ended (its
// servers' policies read and reported, or not checked): for tests. It
// never closes before a call has reached the node.
func (n *Node) PolicyChecked() <-chan struct{} { return n.policy.done }

// policies reads the eviction policy of each server of the node, as far
// as they answer INFO memory within policyTimeout.
func (n *Node) policies(ctx context.Context) []Policy {
	var mu sync.Mutex
	var ps []Policy
	read := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		if p, ok := parsePolicy(info); ok {
			if p.Addr = c.Options().Addr; p.Addr == failoverAddr {
				p.Addr = "" // the master, wherever the Sentinels say it is
			}
			mu.Lock()
			ps = append(ps, p)
			mu.Unlock()
		}
		return nil
	}
	_ = n.Call(ctx, policyTimeout, false, func(ctx context.Context, _ redis.Scripter) error {
		switch r := n.RDB.(type) {
		case *redis.Client:
			return read(ctx, r)
		case *redis.ClusterClient:
			return r.ForEachShard(ctx, read)
		case *redis.Ring:
			return r.ForEachShard(ctx, read)
		}
		return nil
	}, nil)
	mu.Lock()
	defer mu.Unlock()
	return ps
}

// parsePolicy reads maxmemory_policy and maxmemory from the text of INFO
// memory; ok false when it has no policy.
func parsePolicy(info string) (p Policy, ok bool) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, found := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !found {
			continue
		}
		switch k {
		case "maxmemory_policy":
			p.Name, ok = v, true
		case "maxmemory":
			p.MaxMemory, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return p, ok
}
