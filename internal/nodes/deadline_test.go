package nodes_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
)

// A node whose go-redis client applies context deadlines runs each call on
// the caller's goroutine, on a context that ends at the call's timeout,
// and ends it once the call has returned, as context.WithTimeout would.
func TestDirectCallContext(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer rdb.Close()
	n := nodes.New(0, rdb, nil)
	defer n.Close()
	type key struct{}
	bg := context.WithValue(context.Background(), key{}, "v")
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{
		{"cannot end", bg},
		{"detached", nodes.Detach(bg)},
		{"can end", ctxCancel(t, bg)},
	} {
		for i := range 3 { // a pooled timer, reused, ends no later call early
			var inner, derived context.Context
			var cancelDerived context.CancelFunc
			start := time.Now()
			err := n.Call(c.ctx, time.Minute, false, func(ctx context.Context, _ redis.Scripter) error {
				inner = ctx
				derived, cancelDerived = context.WithCancel(ctx)
				if d, ok := ctx.Deadline(); !ok || d.Before(start.Add(time.Minute)) || d.After(time.Now().Add(time.Minute)) {
					t.Errorf("%s: deadline %v %v, want the call's timeout from its start", c.name, d, ok)
				}
				assert.False(t, ctx.Err() != nil || ctx.Value(key{}) != "v", "%s #%d: in the call: err %v, value %v", c.name, i, ctx.Err(), ctx.Value(key{}))
				return nil
			}, nil)
			require.NoError(t, err)
			select {
			case <-inner.Done():
			default:
				t.Fatalf("%s: the call's ctx has not ended once it returned", c.name)
			}
			<-derived.Done() // a context derived from it ends with it
			cancelDerived()
			assert.False(t, !errors.Is(inner.Err(), context.Canceled) || !errors.Is(context.Cause(inner), context.Canceled), "%s: after the call: err %v, cause %v, want context.Canceled", c.name, inner.Err(), context.Cause(inner))
		}
		// At the timeout: Done closes, Err is context.DeadlineExceeded.
		err := n.Call(c.ctx, time.Millisecond, false, func(ctx context.Context, _ redis.Scripter) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Minute): // no hang when broken
				return errors.New("not ended at its timeout")
			}
		}, nil)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "%s: call past its timeout, want context.DeadlineExceeded", c.name)
	}
	// A ctx whose deadline comes before the timeout is the call's own.
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	err := n.Call(ctx, time.Hour, false, func(got context.Context, _ redis.Scripter) error {
		assert.False(t, got != ctx, "a ctx ending before the timeout was wrapped")
		return nil
	}, nil)
	require.NoError(t, err)
}

func ctxCancel(t *testing.T, parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	t.Cleanup(cancel)
	return ctx
}

// Against a server that accepts connections and never answers, with
// go-redis' own timeouts far away, a direct call returns by its timeout:
// its read is cut at the deadline, and so is its wait for a connection
// of a pool whose only one is taken (go-redis ends that wait when the
// context's Done closes, not at its deadline).
func TestDirectCallBounded(t *testing.T) {
	t.Parallel()
	const far = 20 * time.Second // go-redis' timeouts: a call that waits for them fails the test
	hole := redistest.StartBlackhole(t)
	dialed := make(chan struct{}, 8)
	rdb := redis.NewClient(&redis.Options{Addr: hole.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
		ReadTimeout: far, WriteTimeout: far, PoolTimeout: far, PoolSize: 1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if !nodes.IsProbe(ctx) { // go-redis' own dials, not the node's probes
				dialed <- struct{}{}
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}})
	defer rdb.Close()
	n := nodes.New(0, rdb, nil)
	defer n.Close()
	const timeout = 100 * time.Millisecond
	call := func(what string, ctx context.Context) {
		t.Helper()
		start := time.Now()
		err := n.Call(ctx, timeout, false, func(ctx context.Context, rdb redis.Scripter) error {
			return rdb.EvalSha(ctx, "0000000000000000000000000000000000000000", nil).Err()
		}, nil)
		if took := time.Since(start); err == nil || took > far/4 {
			t.Errorf("%s: %v after %v, want an error well before go-redis' timeouts (%v)", what, err, took, far)
		}
	}
	call("read, ctx that cannot end", context.Background())
	call("read, detached ctx", nodes.Detach(context.Background()))

	// Take the pool's only connection: a call on it waits for the hole.
	for len(dialed) > 0 {
		<-dialed // the calls above'
	}
	conn := rdb.Conn()
	held := make(chan error, 1)
	go func() { held <- conn.Ping(context.Background()).Err() }()
	// The Ping holds the pool's only connection: a new one (dialed), or
	// one a call above left idle (no dial), so wait on the pool, not on
	// a dial.
	require.Eventually(t, func() bool {
		s := rdb.PoolStats()
		return s.TotalConns == 1 && s.IdleConns == 0
	}, testkit.Bound, time.Millisecond, "the Ping takes the pool's only connection")
	call("pool wait, ctx that cannot end", context.Background())
	call("pool wait, detached ctx", nodes.Detach(context.Background()))
	hole.Close() // the held call fails, its connection with it
	testkit.Recv(t, held, "the held call's end")
	_ = conn.Close()
}
