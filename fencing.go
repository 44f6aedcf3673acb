package redislock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
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
	type reply struct {
		written bool
		newest  int64
	}
	r, err := nodes.OnceValue(ctx, rdb, func(ctx context.Context) (r reply, err error) {
		r.written, r.newest, err = script.FencedSet(ctx, rdb, []string{key}, value, fence, ttl.Milliseconds())
		return r, err
	})
	if err != nil {
		return err
	}
	if !r.written {
		return staleErr(fence, r.newest)
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
	vals, err := nodes.OnceValue(ctx, rdb, func(ctx context.Context) ([]any, error) {
		return rdb.HMGet(ctx, key, "v", "f").Result()
	})
	if err != nil {
		return "", 0, err
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

// Store returns the Client as a lease.Store: fenced records next to its
// locks, where the pattern packages keep their results. The record of key
// lives at "<prefix>{key}:rec", a hash with fields "v" (value) and "f"
// (fence), the same as FencedSet writes.
//
// In quorum mode a Put or Delete goes to every node and succeeds on a
// majority; it is refused (ErrStaleFence) if any node holds a higher fence.
// A Get reads every node and returns, of a majority's answers, the record
// with the highest fence.
func (c *Client) Store() lease.Store { return recordStore{c} }

type recordStore struct{ c *Client }

var _ lease.Store = recordStore{}

// onRecords runs f on every node, each bounded by the release timeout; fewer
// than a majority answering without error is the nodes' error.
func onRecords[T any](s recordStore, ctx context.Context, f func(ctx context.Context, rdb redis.Scripter) (T, error)) ([]T, error) {
	c := s.c
	o, err := c.callOptions(nil)
	if err != nil {
		return nil, err
	}
	var buf [1]nodes.Reply[T]
	var vs []T
	var errs []error
	for _, r := range nodes.All(ctx, &c.set, buf[:0], o.releaseTimeout, false, "record", struct{}{},
		func(ctx context.Context, rdb redis.Scripter, _ struct{}) (T, error) { return f(ctx, rdb) }) {
		if r.Err != nil {
			errs = append(errs, r.Err)
		} else {
			vs = append(vs, r.Val)
		}
	}
	if len(vs) < c.set.Majority() {
		return nil, c.failed(ErrNoQuorum, errs)
	}
	return vs, nil
}

func (s recordStore) key(key string) []string { return []string{keys.Record(s.c.opts.prefix, key)} }

func checkRecord(key string, fence int64, ttl time.Duration) error {
	switch {
	case key == "":
		return invalid("empty key")
	case fence <= 0:
		return invalid("fence %d must be positive", fence)
	case ttl < 0 || ttl > 0 && ttl < time.Millisecond:
		return invalid("record TTL %v must be 0 or at least 1ms", ttl)
	}
	return nil
}

func staleErr(fence, newest int64) error {
	return fmt.Errorf("%w: fence %d is below %d", ErrStaleFence, fence, newest)
}

// stale returns the error of a write with fence that some node refused
// (newest > 0 there), telling the observers.
func (s recordStore) stale(ctx context.Context, key string, fence int64, newest []int64) error {
	for _, n := range newest {
		if n > 0 {
			if obs := s.c.obs; obs != nil {
				obs.staleFence(ctx, observe.StaleFenceEvent{Key: key, Fence: fence, Newest: n})
			}
			return staleErr(fence, n)
		}
	}
	return nil
}

func (s recordStore) Put(ctx context.Context, key string, value []byte, fence int64, ttl time.Duration) error {
	if err := checkRecord(key, fence, ttl); err != nil {
		return err
	}
	k := s.key(key)
	newest, err := onRecords(s, ctx, func(ctx context.Context, rdb redis.Scripter) (int64, error) {
		written, newest, err := script.FencedSet(ctx, rdb, k, value, fence, ttl.Milliseconds())
		if written {
			newest = 0
		}
		return newest, err
	})
	if err != nil {
		return err
	}
	return s.stale(ctx, key, fence, newest)
}

func (s recordStore) Get(ctx context.Context, key string) (lease.Record, error) {
	if key == "" {
		return lease.Record{}, invalid("empty key")
	}
	k := s.key(key)
	type found struct {
		script.Record
		ok bool
	}
	rs, err := onRecords(s, ctx, func(ctx context.Context, rdb redis.Scripter) (found, error) {
		r, ok, err := script.RecordGet(ctx, rdb, k)
		return found{r, ok}, err
	})
	if err != nil {
		return lease.Record{}, err
	}
	var best found
	for _, r := range rs {
		if r.ok && (!best.ok || r.Fence > best.Fence) {
			best = r
		}
	}
	if !best.ok {
		return lease.Record{}, ErrNotFound
	}
	rec := lease.Record{Value: []byte(best.Value), Fence: best.Fence}
	if best.PTTL > 0 {
		rec.TTL = time.Duration(best.PTTL) * time.Millisecond
	}
	return rec, nil
}

func (s recordStore) Delete(ctx context.Context, key string, fence int64) error {
	if err := checkRecord(key, fence, 0); err != nil {
		return err
	}
	k := s.key(key)
	newer, err := onRecords(s, ctx, func(ctx context.Context, rdb redis.Scripter) (int64, error) {
		return script.RecordDelete(ctx, rdb, k, fence)
	})
	if err != nil {
		return err
	}
	return s.stale(ctx, key, fence, newer)
}
