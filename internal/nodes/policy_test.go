package nodes_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/redistest"
)

// infoHook counts the INFO commands of a client and makes them fail or
// hang, as a proxy or a failing server would.
type infoHook struct {
	calls atomic.Int32
	fail  error         // INFO's error, if not nil
	hang  chan struct{} // INFO waits for its ctx, or for hang to close, if not nil
}

func (h *infoHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *infoHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *infoHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !strings.EqualFold(cmd.Name(), "info") {
			return next(ctx, cmd)
		}
		h.calls.Add(1)
		switch {
		case h.fail != nil:
			cmd.SetErr(h.fail)
			return h.fail
		case h.hang != nil:
			select {
			case <-ctx.Done():
			case <-h.hang:
			}
			cmd.SetErr(errors.New("hung up"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

// policies collects what a node reports.
type policies struct {
	mu sync.Mutex
	ps []nodes.Policy
}

func (p *policies) add(x nodes.Policy) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ps = append(p.ps, x)
}

func (p *policies) list() []nodes.Policy {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]nodes.Policy(nil), p.ps...)
}

// A node reads its server's policy once, after its first call, and
// reports it only when it can evict lock keys; an INFO that fails is not
// reported, and one that hangs ends with the node's Close. A client of
// another kind (not go-redis' own) is not checked.
func TestPolicyCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		args   []string
		hook   *infoHook
		report []nodes.Policy // Addr filled in below
	}{
		{"noeviction", []string{"--maxmemory-policy", "noeviction"}, &infoHook{}, nil},
		{"allkeys-random", []string{"--maxmemory", "1mb", "--maxmemory-policy", "allkeys-random"}, &infoHook{},
			[]nodes.Policy{{Name: "allkeys-random", MaxMemory: 1 << 20}}},
		{"volatile-lfu", []string{"--maxmemory-policy", "volatile-lfu"}, &infoHook{},
			[]nodes.Policy{{Name: "volatile-lfu"}}},
		{"failing", []string{"--maxmemory-policy", "allkeys-lru"}, &infoHook{fail: errors.New("ERR unknown command 'INFO'")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, tc.args...)
			rdb := srv.Client(nil)
			rdb.AddHook(tc.hook)
			got := &policies{}
			n := nodes.New(0, rdb, got.add)
			t.Cleanup(n.Close)
			for range 3 {
				require.NoError(t, n.Call(ctx, time.Second, false, ping, nil))
			}
			<-n.PolicyChecked()
			for i := range tc.report {
				tc.report[i].Addr = srv.Addr()
			}
			assert.Equal(t, tc.report, got.list())
			assert.EqualValues(t, 1, tc.hook.calls.Load(), "INFO calls")
		})
	}
	t.Run("hanging", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, "--maxmemory-policy", "allkeys-lru")
		rdb := srv.Client(nil)
		hook := &infoHook{hang: make(chan struct{})}
		t.Cleanup(func() { close(hook.hang) })
		rdb.AddHook(hook)
		got := &policies{}
		n := nodes.New(0, rdb, got.add)
		require.NoError(t, n.Call(ctx, time.Second, false, ping, nil))
		n.Close()
		<-n.PolicyChecked()
		assert.Empty(t, got.list())
	})
	t.Run("other client", func(t *testing.T) {
		t.Parallel()
		n := nodes.New(0, otherClient{redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})}, func(nodes.Policy) {
			t.Error("a client of another kind was checked")
		})
		t.Cleanup(func() { n.Close(); _ = n.RDB.Close() })
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_ = n.Call(cctx, 10*time.Millisecond, false, func(context.Context, redis.Scripter) error { return nil }, nil)
		<-n.PolicyChecked()
	})
}

// otherClient is a redis.UniversalClient of a type go-redis does not
// make.
type otherClient struct{ *redis.Client }
