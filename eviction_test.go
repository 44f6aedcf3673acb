package redislock_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redisproc"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/observe"
)

// evictions records the EvictionObserver's events.
type evictions struct {
	mu     sync.Mutex
	events []observe.EvictionEvent
}

func (e *evictions) EvictionPolicy(ev observe.EvictionEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, ev)
}

func (e *evictions) list() []observe.EvictionEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]observe.EvictionEvent(nil), e.events...)
}

// evictionWarning is the slog adapter's message for a server that can
// evict lock keys.
const evictionWarning = "can evict lock keys"

// A Redis whose maxmemory-policy can evict lock keys (every policy but
// noeviction: volatile-* ones evict keys with a TTL, and every lock key
// has one) is reported once, after the Client's first call, to the
// EvictionObservers and through WithLogger at Warn, however many calls
// follow; noeviction is not reported. The policy is read with one INFO
// memory, not on every call.
func TestEvictionPolicyWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy string
		warn   bool
	}{
		{"noeviction", false},
		{"allkeys-lru", true},
		{"volatile-lru", true},
		{"volatile-ttl", true},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, "--maxmemory", "64mb", "--maxmemory-policy", tc.policy)
			rec := &evictions{}
			var logs syncBuffer
			c := newClient(t, srv.Client(nil), redislock.WithObserver(rec),
				redislock.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
			ctx := testkit.Context(t)
			before := infoCalls(t, srv) + 1 // and the one that read it
			for range 5 {
				l, err := c.Obtain(ctx, "evictable", time.Second)
				require.NoError(t, err)
				require.NoError(t, l.Release(ctx))
			}
			<-redislock.EvictionChecked(c, 0)
			events := rec.list()
			if !tc.warn {
				assert.Empty(t, events)
				assert.NotContains(t, logs.String(), evictionWarning)
			} else {
				require.Len(t, events, 1)
				assert.Equal(t, observe.EvictionEvent{Node: 0, Addr: srv.Addr(), Policy: tc.policy, MaxMemory: 64 << 20}, events[0])
				assert.Equal(t, 1, strings.Count(logs.String(), evictionWarning), "log: %s", logs.String())
				assert.Contains(t, logs.String(), "policy="+tc.policy)
			}
			assert.Equal(t, 1, infoCalls(t, srv)-before, "INFO calls made by the Client")
		})
	}
}

// infoCalls is how many INFO commands srv has run (the one that reads it
// counts only after it).
func infoCalls(t *testing.T, srv *redistest.Server) int {
	stats, err := srv.Do("INFO", "commandstats")
	require.NoError(t, err)
	for _, line := range strings.Split(stats.(string), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_info:calls="); ok {
			var n int
			for _, c := range rest {
				if c < '0' || c > '9' {
					break
				}
				n = n*10 + int(c-'0')
			}
			return n
		}
	}
	return 0
}

// A server that refuses INFO (an ACL user without it) can evict for all
// the Client knows: nothing is reported, and the caller sees no error of
// the check. (internal/nodes tests an INFO that fails otherwise.)
func TestEvictionPolicyRefused(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--maxmemory-policy", "allkeys-lru")
	_, err := srv.Do("ACL", "SETUSER", "locker", "on", ">pw", "~*", "&*", "+@all", "-info")
	require.NoError(t, err)
	rdb := srv.Client(func(o *redis.Options) { o.Username, o.Password = "locker", "pw" })
	rec := &evictions{}
	c := newClient(t, rdb, redislock.WithObserver(rec))
	ctx := testkit.Context(t)
	l, err := c.Obtain(ctx, "unknown-policy", time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	<-redislock.EvictionChecked(c, 0)
	assert.Empty(t, rec.list())
	_, err = rdb.Info(ctx, "memory").Result()
	require.ErrorContains(t, err, "NOPERM", "the user may run INFO")
}

// In quorum mode each node is checked on its own, and the event names the
// node that can evict.
func TestEvictionPolicyQuorum(t *testing.T) {
	t.Parallel()
	srvs := []*redistest.Server{
		redistest.Start(t),
		redistest.Start(t, "--maxmemory-policy", "allkeys-lfu"),
		redistest.Start(t),
	}
	var rdbs []redis.UniversalClient
	for _, s := range srvs {
		rdbs = append(rdbs, s.Client(nil))
	}
	rec := &evictions{}
	c, err := redislock.NewQuorum(rdbs, redislock.WithObserver(rec), slackNodeTimeout)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := testkit.Context(t)
	l, err := c.Obtain(ctx, "quorum-evictable", time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	for i := range srvs {
		<-redislock.EvictionChecked(c, i)
	}
	assert.Equal(t, []observe.EvictionEvent{{Node: 1, Addr: srvs[1].Addr(), Policy: "allkeys-lfu"}}, rec.list())
}

// On Redis Cluster every shard is checked, and each that can evict is
// reported once.
func TestEvictionPolicyCluster(t *testing.T) {
	t.Parallel()
	testkit.SkipShort(t)
	cl := redistest.StartCluster(t, redisproc.ClusterConfig{Replicas: redisproc.NoReplicas,
		Args: []string{"--maxmemory-policy", "volatile-lru"}})
	rec := &evictions{}
	c := newClient(t, cl.Client(nil), redislock.WithObserver(rec))
	ctx := testkit.Context(t)
	for i := range 3 {
		l, err := c.Obtain(ctx, fmt.Sprintf("cluster-evictable-%d", i), 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	<-redislock.EvictionChecked(c, 0)
	var addrs []string
	for _, e := range rec.list() {
		assert.Equal(t, "volatile-lru", e.Policy)
		addrs = append(addrs, e.Addr)
	}
	assert.ElementsMatch(t, cl.Addrs(), addrs)
}
