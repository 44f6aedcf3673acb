package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
)

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

// onNodes runs f on every node, each bounded by the release timeout; fewer
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
	for _, r := range onNodes(c, buf[:0], ctx, o.releaseTimeout, false, "record", struct{}{},
		func(ctx context.Context, rdb redis.Scripter, _ struct{}) (T, error) { return f(ctx, rdb) }) {
		if r.Err != nil {
			errs = append(errs, r.Err)
		} else {
			vs = append(vs, r.Val)
		}
	}
	if len(vs) < c.majority() {
		return nil, c.m.failed(ErrNoQuorum, errs)
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
