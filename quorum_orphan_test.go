package redislock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
)

// A node whose obtain timed out may hold the grant all the same (the
// request arrived, the reply came too late). The lock keeps that node:
// nothing of a held lock is released behind its holder's back, so a
// Refresh may count the node once it confirms it holds the grant. (The
// client used to release such a node in the background while a Refresh
// counted it: when the release landed, fewer than a majority held the
// grant while its holder believed it valid, and a second client was
// granted the lock within that validity; the simulation found it: seed
// 6098 of TestSim/safe.)
//
// Here node 2's obtain runs but answers only after its node timeout; node
// 1 stops answering; the holder refreshes on nodes 0 and 2. Node 2 still
// holds the grant afterwards, and a second client is not granted the lock
// before the first holder's validity has ended.
func TestQuorumRefreshCountsLateNode(t *testing.T) {
	t.Parallel()
	q := startQuorum(t, 3)
	// A TTL that outlasts the wait for node 2's late answer on a loaded machine.
	const key, ttl = "orphan", 8 * time.Second
	proxy := redistest.StartProxy(t, q.srvs[1].Addr())
	hook := &lateNodeHook{key: redislock.LockKey(key), ran: make(chan struct{})}
	var rdbs []redis.UniversalClient
	for i, s := range q.srvs {
		rdb := s.Client(func(o *redis.Options) {
			o.MaxRetries = -1
			o.ContextTimeoutEnabled = true // the node timeout is the calls' deadline
			if i == 1 {
				o.Addr = proxy.Addr()
			}
		})
		if i == 2 {
			rdb.AddHook(hook)
		}
		rdbs = append(rdbs, rdb)
	}
	c, err := redislock.NewQuorum(rdbs, redislock.WithNodeTimeout(time.Second), redislock.WithReleaseTimeout(time.Minute))
	require.NoError(t, err)
	defer c.Close()
	ctx := testkit.Context(t)
	// Connections up and the scripts loaded, on another key.
	warm, err := c.Obtain(ctx, "warm", ttl)
	require.NoError(t, err)
	require.NoError(t, warm.Refresh(ctx, ttl))
	require.NoError(t, warm.Release(ctx))

	l, err := c.Obtain(ctx, key, ttl)
	require.NoError(t, err)
	testkit.Recv(t, hook.ran, "node 2's obtain")
	// Its reply comes at the node timeout; once it has, the lock knows the
	// node may hold the grant.
	require.Eventually(t, func() bool { return redislock.NodeSettled(l, 2) }, 10*time.Second, 5*time.Millisecond, "node 2's obtain to answer")
	require.Equal(t, 3, q.holders(t, key, l.Token()), "the grant is on every node (node 2's obtain ran)")
	proxy.Cut(redistest.Both)
	// Node 0 extends; node 1 does not answer; node 2 holds the grant.
	require.NoError(t, l.Refresh(ctx, ttl), "Refresh with node 1 silent")
	until := l.ValidUntil()
	require.True(t, held(ctx, q.rdbs[2], redislock.LockKey(key)), "node 2 lost the grant")

	c2, err := redislock.NewQuorum(q.rdbs, slackNodeTimeout)
	require.NoError(t, err)
	defer c2.Close()
	l2, err := c2.Obtain(ctx, key, ttl, redislock.WithRetry(redislock.LinearBackoff(20*time.Millisecond)))
	require.NoError(t, err)
	got := time.Now()
	require.False(t, got.Before(until), "a second client was granted fence %d %v before the first holder's validity ended", l2.Fence(), until.Sub(got))
	require.Greater(t, l2.Fence(), l.Fence())
}

// lateNodeHook is node 2's network: the first obtain of key runs on the
// node (ran is closed then), but its reply reaches the caller only after
// the call's deadline. Other calls pass.
type lateNodeHook struct {
	key  string
	ran  chan struct{}
	once sync.Once
}

func (*lateNodeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lateNodeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if len(a) < 4 || fmt.Sprint(a[2]) != "1" || a[3] != h.key {
			return next(ctx, cmd)
		}
		first := false
		h.once.Do(func() { first = true })
		if !first {
			return next(ctx, cmd)
		}
		err := next(context.WithoutCancel(ctx), cmd)
		close(h.ran)
		if err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	}
}

func (*lateNodeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
