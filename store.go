package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/lease"
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

func recordKey(prefix, key string) string {
	return prefix + "{" + tagEscaper.Replace(key) + "}:rec"
}

// nodeResult is one node's answer to a record operation.
type nodeResult struct {
	rec   lease.Record
	found bool
	stale int64 // > 0: a higher fence refused the write
	err   error
}

// onNodes runs f on every node in parallel, each bounded by the release
// timeout, and returns the answers; fewer than a majority without error is
// the nodes' error.
func (s recordStore) onNodes(ctx context.Context, f func(ctx context.Context, rdb redis.UniversalClient) nodeResult) ([]nodeResult, error) {
	c := s.c
	o, err := c.callOptions(nil)
	if err != nil {
		return nil, err
	}
	ch := make(chan nodeResult, len(c.nodes))
	for i, rdb := range c.nodes {
		c.background(func() {
			cctx, cancel := context.WithTimeout(ctx, o.releaseTimeout)
			defer cancel()
			r := f(cctx, rdb)
			if r.err != nil {
				r.err = &NodeError{Node: i, Err: r.err}
			}
			ch <- r
		})
	}
	rs := make([]nodeResult, 0, len(c.nodes))
	var errs []error
	for range c.nodes {
		r := <-ch
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		rs = append(rs, r)
	}
	if len(rs) < c.majority() {
		return nil, c.nodesErr(errs)
	}
	return rs, nil
}

func (s recordStore) key(key string) string { return recordKey(s.c.opts.prefix, key) }

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

func (s recordStore) Put(ctx context.Context, key string, value []byte, fence int64, ttl time.Duration) error {
	if err := checkRecord(key, fence, ttl); err != nil {
		return err
	}
	k := s.key(key)
	rs, err := s.onNodes(ctx, func(ctx context.Context, rdb redis.UniversalClient) nodeResult {
		res, err := fencedSetScript.Run(ctx, rdb, []string{k}, value, fence, ttl.Milliseconds()).Int64Slice()
		switch {
		case err != nil:
			return nodeResult{err: err}
		case len(res) != 2:
			return nodeResult{err: fmt.Errorf("redislock: unexpected fenced_set reply %v", res)}
		case res[0] != 1:
			return nodeResult{stale: res[1]}
		}
		return nodeResult{}
	})
	if err != nil {
		return err
	}
	return firstStale(rs, fence)
}

func firstStale(rs []nodeResult, fence int64) error {
	for _, r := range rs {
		if r.stale > 0 {
			return staleErr(fence, r.stale)
		}
	}
	return nil
}

func (s recordStore) Get(ctx context.Context, key string) (lease.Record, error) {
	if key == "" {
		return lease.Record{}, invalid("empty key")
	}
	k := s.key(key)
	rs, err := s.onNodes(ctx, func(ctx context.Context, rdb redis.UniversalClient) nodeResult {
		res, err := recordGetScript.Run(ctx, rdb, []string{k}).Slice()
		if err != nil {
			return nodeResult{err: err}
		}
		if len(res) == 0 {
			return nodeResult{}
		}
		v, ok1 := res[0].(string)
		f, ok2 := res[1].(int64)
		pttl, ok3 := res[2].(int64)
		if len(res) != 3 || !ok1 || !ok2 || !ok3 {
			return nodeResult{err: fmt.Errorf("redislock: unexpected record_get reply %v", res)}
		}
		r := lease.Record{Value: []byte(v), Fence: f}
		if pttl > 0 {
			r.TTL = time.Duration(pttl) * time.Millisecond
		}
		return nodeResult{rec: r, found: true}
	})
	if err != nil {
		return lease.Record{}, err
	}
	var best nodeResult
	for _, r := range rs {
		if r.found && (!best.found || r.rec.Fence > best.rec.Fence) {
			best = r
		}
	}
	if !best.found {
		return lease.Record{}, ErrNotFound
	}
	return best.rec, nil
}

func (s recordStore) Delete(ctx context.Context, key string, fence int64) error {
	if err := checkRecord(key, fence, 0); err != nil {
		return err
	}
	k := s.key(key)
	rs, err := s.onNodes(ctx, func(ctx context.Context, rdb redis.UniversalClient) nodeResult {
		newer, err := recordDeleteScript.Run(ctx, rdb, []string{k}, fence).Int64()
		return nodeResult{stale: newer, err: err}
	})
	if err != nil {
		return err
	}
	return firstStale(rs, fence)
}
