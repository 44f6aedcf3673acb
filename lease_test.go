package redislock_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/lease/leasetest"
	"github.com/stretchr/testify/require"
)

// The Client passes the lease contract's conformance suite: single mode on
// miniredis and on a real redis-server, quorum mode on three real ones.

// leaseTTL is the suite's lease for the cases that wait for an expiry: room
// for the round trips of a loaded machine (the suite's 300 ms is not).
const leaseTTL = time.Second

func TestLeaseMiniredis(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		m := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		c := newClient(t, rdb)
		return leasetest.Env{
			Locker: c.Locker(),
			Store:  c.Store(),
			Other:  newClient(t, rdb).Locker(),
			Break:  func(key string) { m.Del(redislock.LockKey(key)) },
			Sleep:  miniSleep(m),
			TTL:    leaseTTL,
		}
	})
}

func TestLeaseRedis(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		srv := redistest.Start(t)
		c := newClient(t, srv.Client(nil))
		return leasetest.Env{
			Locker: c.Locker(),
			Store:  c.Store(),
			Other:  newClient(t, srv.Client(nil)).Locker(),
			Break:  breakOn(srv),
			TTL:    leaseTTL,
		}
	})
}

func TestLeaseQuorum(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		srvs := redistest.StartN(t, 3)
		c := newQuorum(t, srvs)
		return leasetest.Env{
			Locker: c.Locker(),
			Store:  c.Store(),
			Other:  newQuorum(t, srvs).Locker(),
			Break:  breakOn(srvs...),
			TTL:    leaseTTL,
		}
	})
}

func newQuorum(t *testing.T, srvs []*redistest.Server, opts ...redislock.ClientOption) *redislock.Client {
	t.Helper()
	var rdbs []redis.UniversalClient
	for _, s := range srvs {
		rdbs = append(rdbs, s.Client(nil))
	}
	c, err := redislock.NewQuorum(rdbs, append([]redislock.ClientOption{slackNodeTimeout}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// breakOn takes a lock away behind its holder's back: on one server as an
// operator's DEL would. On several (quorum mode) it puts another grant in
// its place for a while instead: a renewal that came between the servers'
// DELs would take the deleted ones back (a refresh joins the nodes where
// the key is free, join.lua), and with a renewal between each two DELs (a
// loaded machine) the lock was never lost; a join never takes a node that
// holds another grant, so the next renewals find the lock gone.
func breakOn(srvs ...*redistest.Server) func(key string) {
	return func(key string) {
		for _, s := range srvs {
			cmd := []any{"DEL", redislock.LockKey(key)}
			if len(srvs) > 1 {
				cmd = []any{"SET", redislock.LockKey(key), "broken:1::;", "PX", 10_000}
			}
			if _, err := s.Do(cmd...); err != nil {
				panic(err)
			}
		}
	}
}

// miniSleep lets d pass for the client and for m, which expires keys only
// when told to: in small steps, so that renewals keep up.
func miniSleep(m *miniredis.Miniredis) func(time.Duration) {
	return func(d time.Duration) {
		const step = 10 * time.Millisecond
		for ; d > 0; d -= step {
			// A sleep: the client renews on the wall clock.
			time.Sleep(min(step, d))
			m.FastForward(min(step, d))
		}
	}
}
