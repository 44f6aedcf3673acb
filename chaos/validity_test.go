package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
)

// Conservative validity (P4): right after a grant returns, every node that
// holds it has a PTTL at least the validity the client claims
// (ValidUntil - now), even with 100 ms of reply latency in the way. Single
// mode, and quorum mode with the latency on two of five nodes.
func TestClaimConservativeValidity(t *testing.T) {
	needRedis(t)
	check := func(t *testing.T, ns []*node, c *redislock.Client, key string, ttl time.Duration) {
		t.Helper()
		for i := 0; i < 5; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			l, err := c.Obtain(ctx, key, ttl)
			cancel()
			require.NoError(t, err, "obtain")
			holders := 0
			for j, n := range ns {
				v, err := n.srv.Do("PTTL", lockKey(key)) // directly, not through the proxy
				require.NoError(t, err)
				// The validity claimed when the reply arrived, no earlier
				// than when Redis read the PTTL: the checks of the nodes
				// before this one take time, which both clocks count.
				claimed := time.Until(l.ValidUntil())
				val, _ := n.srv.Do("GET", lockKey(key))
				if s, _ := val.(string); lockValue(s).Token != l.Token() {
					continue // a node that did not grant (quorum mode)
				}
				holders++
				if pttl := time.Duration(v.(int64)) * time.Millisecond; pttl+time.Millisecond < claimed {
					t.Errorf("node %d: PTTL %v below the claimed validity %v", j, pttl, claimed)
				}
			}
			assert.GreaterOrEqual(t, holders, len(ns)/2+1, "only %d of %d nodes hold the grant", holders, len(ns))
			summary.ops.Add(1)
			require.NoError(t, l.Release(context.Background()))
		}
	}
	t.Run("single", func(t *testing.T) {
		ns := startNodes(t, 1)
		c := singleClient(t, ns[0])
		// Connected and the scripts loaded before the latency: a cold first
		// call's round trips (handshake, NOSCRIPT, load) at 100 ms each
		// can outlast the 1 s lease's validity, its deadline, on a loaded
		// machine.
		warmUp(t, Workload{Client: c, Key: "validity-single", Workers: 1})
		f := Latency(ns[0].proxy, 100, 0)
		require.NoError(t, f.Inject())
		defer f.Heal()
		summary.faults.Add(1)
		check(t, ns, c, "validity-single", time.Second)
	})
	t.Run("quorum", func(t *testing.T) {
		ns := startNodes(t, 5)
		c := quorumClient(t, ns, redislock.WithNodeTimeout(300*time.Millisecond))
		warmUp(t, Workload{Client: c, Key: "validity-quorum", Workers: 1})
		for _, n := range ns[3:] {
			f := Latency(n.proxy, 100, 0)
			require.NoError(t, f.Inject())
			defer f.Heal()
		}
		summary.faults.Add(2)
		check(t, ns, c, "validity-quorum", time.Second)
	})
}
