package nodes_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/redistest"
)

func ping(ctx context.Context, rdb redis.Scripter) error {
	return rdb.(redis.Cmdable).Ping(ctx).Err()
}

// A call on a node it cannot reach in time says why: the dial's error, a
// server that accepts connections but does not answer, or a connect that
// has no answer yet (a Dialer that hangs), with the call's timeout; the
// error still matches the timeout and the dial's error. A call on a node
// that answers is not probed.
func TestProbeSaysWhy(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	silent := redistest.StartBlackhole(t)
	stop := make(chan struct{}) // ends the hanging dials, go-redis' and the probe's
	t.Cleanup(func() { close(stop) })
	hang := func(ctx context.Context, _, _ string) (net.Conn, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-stop:
			return nil, errors.New("test over")
		}
	}
	for _, tc := range []struct {
		name string
		opts redis.Options
		want string
		is   error
	}{
		{"refused", redis.Options{Addr: closed}, "dial tcp " + closed + ": connect: connection refused (no reply within 500ms)", syscall.ECONNREFUSED},
		{"silent", redis.Options{Addr: silent.Addr()}, silent.Addr() + " accepts connections but sent no reply within 500ms", nil},
		{"hanging dial", redis.Options{Addr: "127.0.0.1:1", Dialer: hang}, "connecting to 127.0.0.1:1: no answer within 500ms", nil},
		{"refused, deadlines", redis.Options{Addr: closed, ContextTimeoutEnabled: true},
			"dial tcp " + closed + ": connect: connection refused (no reply within 500ms)", syscall.ECONNREFUSED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb := redis.NewClient(&tc.opts)
			n := nodes.New(0, rdb, nil)
			t.Cleanup(func() { n.Close(); _ = rdb.Close() })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := n.Call(ctx, 500*time.Millisecond, false, ping, nil)
			var nr *nodes.NoReplyError
			require.ErrorAs(t, err, &nr)
			assert.EqualError(t, err, tc.want)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			assert.True(t, n.Down())
		})
	}
	t.Run("reachable", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		rdb := srv.Client(nil)
		n := nodes.New(0, rdb, nil)
		t.Cleanup(n.Close)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		require.NoError(t, n.Call(ctx, time.Second, false, ping, nil))
		// An error on a node that answered: no probe, the call's own error.
		err := n.Call(ctx, time.Second, false, func(ctx context.Context, _ redis.Scripter) error {
			return rdb.Do(ctx, "DEBUG", "SLEEP", "0").Err() // refused by default: an error reply
		}, nil)
		require.Error(t, err)
		var nr *nodes.NoReplyError
		assert.False(t, errors.As(err, &nr), "%v", err)
		assert.Equal(t, err, nodes.New(0, rdb, nil).NoReply(err), "NoReply on a node never called: no probe, err itself")
	})
}

// A fan-out's node that its caller stopped waiting for (NoReply) is
// explained by the probe that ran beside its call.
func TestNoReply(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	rdb := redis.NewClient(&redis.Options{Addr: closed})
	n := nodes.New(0, rdb, nil)
	t.Cleanup(func() { n.Close(); _ = rdb.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_ = n.Call(ctx, 500*time.Millisecond, false, ping, nil)
	err = n.NoReply(context.DeadlineExceeded)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.EqualError(t, err, "dial tcp "+closed+": connect: connection refused: context deadline exceeded")
}
