package redislock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
)

// FencedSet writes value to the Redis hash at key (fields "v" and "f") only
// if fence is not below the fence of the last accepted write, and returns
// ErrStaleFence otherwise. ttl > 0 sets the key's expiry; ttl == 0 leaves it
// as it is. key is used as given (no prefix); in Redis Cluster it may live
// in any slot.
func FencedSet(ctx context.Context, rdb redis.Scripter, key, value string, fence int64, ttl time.Duration) error {
	switch {
	case nodes.IsNil(rdb):
		return invalid("nil redis client")
	case ctx == nil:
		return invalid("nil context")
	case key == "":
		return invalid("empty key")
	case fence <= 0:
		return invalid("fence %d must be positive", fence)
	case ttl < 0 || (ttl > 0 && ttl < time.Millisecond):
		return invalid("TTL %v must be 0 or at least 1ms", ttl)
	}
	var written bool
	var newest int64
	if err := nodes.Once(ctx, rdb, func(ctx context.Context) (err error) {
		written, newest, err = script.FencedSet(ctx, rdb, []string{key}, value, fence, ttl.Milliseconds())
		return err
	}); err != nil {
		return err // written and newest may still be written (abandoned)
	}
	if !written {
		return staleErr(fence, newest)
	}
	return nil
}

// FencedGet reads a value written by FencedSet and the fence that wrote it.
// A missing key returns redis.Nil.
func FencedGet(ctx context.Context, rdb redis.Cmdable, key string) (value string, fence int64, err error) {
	switch {
	case nodes.IsNil(rdb):
		return "", 0, invalid("nil redis client")
	case ctx == nil:
		return "", 0, invalid("nil context")
	}
	var vals []any
	if err := nodes.Once(ctx, rdb, func(ctx context.Context) (err error) {
		vals, err = rdb.HMGet(ctx, key, "v", "f").Result()
		return err
	}); err != nil {
		return "", 0, err // vals may still be written (abandoned)
	}
	v, ok1 := vals[0].(string)
	f, ok2 := vals[1].(string)
	if !ok1 || !ok2 {
		return "", 0, redis.Nil
	}
	if fence, err = strconv.ParseInt(f, 10, 64); err != nil {
		return "", 0, fmt.Errorf("redislock: key %q holds no fenced value: %w", key, err)
	}
	return v, fence, nil
}

// FenceGate is the same check for a resource in a Go process: a service
// that takes writes from lock holders keeps one gate per resource. The zero
// value is ready to use and safe for concurrent use.
type FenceGate struct {
	mu     sync.Mutex
	newest int64
}

// Admit records fence and returns nil if it is not below the newest fence
// admitted so far, or an error matching ErrStaleFence; a fence <= 0 (no
// grant's) is an error matching ErrInvalidArgument. To make the check and
// the write one step, call Do instead.
func (g *FenceGate) Admit(fence int64) error {
	return g.Do(fence, func() error { return nil })
}

// Do runs write while holding the gate, only if fence is not below the
// newest fence admitted; fence is admitted when write returns nil.
func (g *FenceGate) Do(fence int64, write func() error) error {
	if fence <= 0 {
		return invalid("fence %d must be positive", fence)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if fence < g.newest {
		return staleErr(fence, g.newest)
	}
	if err := write(); err != nil {
		return err
	}
	g.newest = fence
	return nil
}
