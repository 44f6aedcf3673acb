package redislock_test

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// closedAddr returns a loopback address where nothing listens: a port
// taken and given back.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// When no attempt reached Redis, the error says why, whatever the TTL:
// the dial's error for a port where nothing listens (go-redis retries its
// dials for longer than a short TTL's node timeout, which ended the call
// with a bare "context deadline exceeded"), a server that accepts
// connections but never answers for a silent one; with or without
// go-redis' ContextTimeoutEnabled, in single and quorum mode. The error
// still matches context.DeadlineExceeded where the call timed out.
func TestUnreachableSaysWhy(t *testing.T) {
	t.Parallel()
	silent := redistest.StartBlackhole(t)
	type target struct {
		name  string
		addr  func(t *testing.T) string
		check func(t *testing.T, err error)
	}
	refused := target{"refused", closedAddr, func(t *testing.T, err error) {
		assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		assert.ErrorContains(t, err, "connection refused")
	}}
	mute := target{"silent", func(*testing.T) string { return silent.Addr() }, func(t *testing.T, err error) {
		assert.ErrorContains(t, err, silent.Addr()+" accepts connections but sent no reply")
	}}
	for _, tc := range []struct {
		target
		ttl      time.Duration
		deadline bool // go-redis' ContextTimeoutEnabled
	}{
		{refused, 300 * time.Millisecond, false},
		{refused, time.Second, false},
		{refused, 10 * time.Second, false},
		{refused, 300 * time.Millisecond, true},
		{refused, time.Second, true},
		{mute, 300 * time.Millisecond, false},
		{mute, time.Second, false},
		{mute, 10 * time.Second, false}, // go-redis' own timeouts end it
		{mute, time.Second, true},
	} {
		t.Run(fmt.Sprintf("%s ttl %v deadlines %v", tc.name, tc.ttl, tc.deadline), func(t *testing.T) {
			t.Parallel()
			rdb := redis.NewClient(&redis.Options{Addr: tc.addr(t), ContextTimeoutEnabled: tc.deadline})
			t.Cleanup(func() { _ = rdb.Close() })
			c := newClient(t, rdb)
			ctx, cancel := context.WithCancel(context.Background()) // a ctx that can end: calls are bounded
			defer cancel()
			l, err := c.Obtain(ctx, "unreachable", tc.ttl)
			require.Nil(t, l)
			require.Error(t, err)
			assert.NotErrorIs(t, err, redislock.ErrNotObtained)
			var ne *redislock.NodeError
			assert.ErrorAs(t, err, &ne)
			tc.check(t, err)
			checkErrText(t, "unreachable", err, true)
		})
	}
	t.Run("quorum", func(t *testing.T) {
		t.Parallel()
		var rdbs []redis.UniversalClient
		for range 3 {
			rdb := redis.NewClient(&redis.Options{Addr: closedAddr(t)})
			t.Cleanup(func() { _ = rdb.Close() })
			rdbs = append(rdbs, rdb)
		}
		c, err := redislock.NewQuorum(rdbs)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, err = c.Obtain(ctx, "unreachable", 3*time.Second) // a node timeout of 300 ms
		require.ErrorIs(t, err, redislock.ErrNoQuorum)
		var qe *redislock.QuorumError
		require.ErrorAs(t, err, &qe)
		require.Len(t, qe.Nodes, 3)
		for _, ne := range qe.Nodes {
			assert.ErrorIs(t, ne, syscall.ECONNREFUSED)
		}
		checkErrText(t, "quorum unreachable", err, false)
	})
	t.Run("ctx deadline", func(t *testing.T) {
		t.Parallel()
		rdb := redis.NewClient(&redis.Options{Addr: closedAddr(t)})
		t.Cleanup(func() { _ = rdb.Close() })
		c := newClient(t, rdb)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := c.Obtain(ctx, "unreachable", 10*time.Second)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		checkErrText(t, "unreachable within ctx", err, true)
	})
}
