package redislock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/lease"
)

// MultiLock is one grant of several keys, obtained all or nothing by
// ObtainMulti: one token, one lease, and a fence per key. Its methods act on
// the whole set, are safe for concurrent use, and a nil *MultiLock answers
// ErrNotHeld.
type MultiLock struct {
	c      *Client
	keys   []string // as the caller gave them
	groups [][]keys // canonical order; each group is one script call
	fences map[string]int64
	token  string
	opts   options

	validity
}

// ObtainMulti takes the locks on all keys at once, as one lock: either it
// holds every key when it returns, or none. The keys must be distinct and
// non-empty; there must be at least one. Retries, waiting (notified or
// polling), errors and ValidUntil are as for Obtain; while waiting, it waits
// for the key that was found held.
//
// On a standalone Redis (or Sentinel), and on Redis Cluster when all keys
// hash to one slot (give them a common part in braces, as in "{order:7}:a"
// and "{order:7}:b"), one atomic script checks and takes every key. On
// Cluster with keys in several slots, it takes the keys one slot at a time
// in a canonical (sorted) order and, when one is held, gives back those it
// took before waiting: a holder never waits while holding, so {a,b} and
// {b,a} cannot deadlock. There a competing ObtainMulti may briefly see some
// of the keys held by a set that is then rolled back.
//
// Quorum mode and WithFair are not supported (errors matching
// ErrInvalidArgument).
func (c *Client) ObtainMulti(ctx context.Context, keyList []string, ttl time.Duration, opts ...Option) (*MultiLock, error) {
	o, err := c.callOptions(opts)
	if err != nil {
		return nil, err
	}
	switch {
	case c.quorum:
		return nil, invalid("ObtainMulti is not supported in quorum mode")
	case o.fair:
		return nil, invalid("ObtainMulti does not support WithFair")
	case len(keyList) == 0:
		return nil, invalid("no keys")
	case ctx == nil:
		return nil, invalid("nil context")
	}
	seen := make(map[string]bool, len(keyList))
	for _, k := range keyList {
		if k == "" {
			return nil, invalid("empty key")
		}
		if seen[k] {
			return nil, invalid("duplicate key %q", k)
		}
		seen[k] = true
	}
	if err := o.checkTTL(ttl); err != nil {
		return nil, err
	}
	m := &MultiLock{
		c:      c,
		keys:   slices.Clone(keyList),
		groups: c.slotGroups(o.prefix, keyList),
		token:  rand.Text(),
		opts:   o,
	}

	deadline := o.waitDeadline(ctx, ttl)
	ws := c.newWaitState(&o, func(ctx context.Context) error { return m.obtainOnce(ctx, ttl) }, nil)
	defer ws.stop()
	for attempt := 1; ; attempt++ {
		err := m.obtainOnce(ctx, ttl)
		if !errors.Is(err, ErrNotObtained) {
			if err != nil && ctx.Err() != nil {
				return nil, errors.Join(err, ctx.Err())
			}
			if err != nil {
				return nil, err
			}
			return m, nil
		}
		wait, werr := deadline.next(&o, attempt, ErrNotObtained)
		if werr != nil {
			return nil, werr
		}
		switch granted, err := ws.waitRetry(ctx, wait, err); {
		case granted:
			return m, nil
		case err != nil:
			return nil, err
		}
	}
}

// slotGroups sorts the keys' Redis keys into canonical order and groups
// them into script calls: one group, unless the client is a Redis Cluster
// client and the keys span several slots, then one group per slot.
func (c *Client) slotGroups(prefix string, keyList []string) [][]keys {
	ks := make([]keys, len(keyList))
	for i, k := range keyList {
		ks[i] = makeKeys(prefix, k)
	}
	slices.SortFunc(ks, func(a, b keys) int { return strings.Compare(a.lock, b.lock) })
	if _, cluster := c.nodes[0].(*redis.ClusterClient); !cluster {
		return [][]keys{ks}
	}
	slices.SortStableFunc(ks, func(a, b keys) int { return int(keySlot(a.lock)) - int(keySlot(b.lock)) })
	var groups [][]keys
	for i, k := range ks {
		if i > 0 && keySlot(k.lock) == keySlot(ks[i-1].lock) {
			groups[len(groups)-1] = append(groups[len(groups)-1], k)
		} else {
			groups = append(groups, []keys{k})
		}
	}
	return groups
}

// keySlot is the Redis Cluster hash slot of a key: CRC16 (XMODEM) of its
// hash tag, or of the whole key when it has none, modulo 16384.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// obtainOnce makes one all-or-nothing attempt: nil with every key granted
// and valid, a *heldError when a key is held, or another error. Whatever it
// may have granted is released unless it returns nil.
func (m *MultiLock) obtainOnce(ctx context.Context, ttl time.Duration) error {
	c, rdb := m.c, m.c.nodes[0]
	start := time.Now()
	ms := ttl.Milliseconds()
	fences := make(map[string]int64, len(m.keys))
	for gi, g := range m.groups {
		ks := make([]string, 0, 2*len(g))
		for _, k := range g {
			ks = append(ks, k.lock, k.fence)
		}
		cctx, cancel := context.WithTimeout(ctx, c.nodeTimeout(&m.opts, ttl))
		res, err := multiObtainScript.Run(cctx, rdb, ks, m.token, ms, fenceCounterTTL.Milliseconds(), m.opts.holder).Int64Slice()
		cancel()
		switch {
		case err != nil:
			// This group's script may have run: release it too, in the
			// background, with the groups taken before.
			c.background(func() { m.releaseGroups(m.groups[:gi+1]) })
			return &NodeError{Node: 0, Err: err}
		case len(res) == 3 && res[0] == 0 && res[1] >= 1 && int(res[1]) <= len(g):
			m.releaseGroups(m.groups[:gi])
			if res[2] == -1 {
				return &NodeError{Node: 0, Err: errNoExpiry}
			}
			return heldFor(g[res[1]-1], res[2])
		case len(res) == len(g)+1 && res[0] == 1:
			for i, k := range g {
				fences[k.lock] = res[i+1]
			}
		default:
			m.releaseGroups(m.groups[:gi+1])
			return &NodeError{Node: 0, Err: fmt.Errorf("redislock: unexpected multi_obtain reply %v", res)}
		}
	}
	m.fences = make(map[string]int64, len(m.keys))
	for _, k := range m.keys {
		m.fences[k] = fences[makeKeys(m.opts.prefix, k).lock]
	}
	if err := m.confirmFrom(&m.opts, start, ttl); err != nil {
		m.releaseGroups(m.groups)
		return err
	}
	return nil
}

// releaseGroups gives back the given groups, each bounded by the release
// timeout on a context without cancellation; it returns how many keys were
// deleted and the first error.
func (m *MultiLock) releaseGroups(groups [][]keys) (released int, err error) {
	for _, g := range groups {
		ks := make([]string, 0, 3*len(g))
		for _, k := range g {
			ks = append(ks, k.lock, k.wake(), k.queue())
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.opts.releaseTimeout)
		n, e := multiReleaseScript.Run(ctx, m.c.nodes[0], ks, m.token, m.opts.publish(false)).Int()
		cancel()
		released += n
		if e != nil && err == nil {
			err = &NodeError{Node: 0, Err: e}
		}
	}
	return released, err
}

// Keys returns the keys of the lock, in the order the caller gave them.
func (m *MultiLock) Keys() []string {
	if m == nil {
		return nil
	}
	return slices.Clone(m.keys)
}

// Token returns the grant's random ownership token, shared by all its keys.
func (m *MultiLock) Token() string {
	if m == nil {
		return ""
	}
	return m.token
}

// Fence returns the fencing token of key in this grant (see Lock.Fence):
// each key has its own fence sequence. Zero if key is not part of the lock.
func (m *MultiLock) Fence(key string) int64 {
	if m == nil {
		return 0
	}
	return m.fences[key]
}

// ValidUntil returns the end of the validity last confirmed for all keys
// (see Lock.ValidUntil); the zero Time once the set is known not to be held.
func (m *MultiLock) ValidUntil() time.Time {
	if m == nil {
		return time.Time{}
	}
	return m.validUntil()
}

// TTL returns the least remaining time to live of the keys on Redis, or
// ErrNotHeld when any key no longer holds this grant.
func (m *MultiLock) TTL(ctx context.Context) (time.Duration, error) {
	if m == nil {
		return 0, ErrNotHeld
	}
	least := int64(-1)
	for _, g := range m.groups {
		cctx, cancel := context.WithTimeout(ctx, m.c.nodeTimeout(&m.opts, m.currentTTL()))
		ms, err := multiTTLScript.Run(cctx, m.c.nodes[0], locksOf(g), m.token).Int64()
		cancel()
		if err != nil {
			return 0, &NodeError{Node: 0, Err: err}
		}
		if ms == -3 {
			m.lost()
			return 0, ErrNotHeld
		}
		if least < 0 || ms < least {
			least = ms
		}
	}
	return time.Duration(least) * time.Millisecond, nil
}

func locksOf(g []keys) []string {
	ks := make([]string, len(g))
	for i, k := range g {
		ks[i] = k.lock
	}
	return ks
}

// Refresh extends every key's lease to ttl from now, only if this grant
// still holds all of them, and moves ValidUntil forward. When any key is
// gone it returns ErrNotHeld and releases the keys still held, so that the
// set is never held in part. A Redis error leaves ValidUntil as it was.
func (m *MultiLock) Refresh(ctx context.Context, ttl time.Duration) error {
	if m == nil {
		return ErrNotHeld
	}
	if err := m.opts.checkTTL(ttl); err != nil {
		return err
	}
	start := time.Now()
	ms := ttl.Milliseconds()
	for _, g := range m.groups {
		cctx, cancel := context.WithTimeout(ctx, m.c.nodeTimeout(&m.opts, ttl))
		n, err := multiRefreshScript.Run(cctx, m.c.nodes[0], locksOf(g), m.token, ms).Int64()
		cancel()
		if err != nil {
			return &NodeError{Node: 0, Err: err}
		}
		if n != 1 {
			m.lost()
			_, _ = m.releaseGroups(m.groups)
			return ErrNotHeld
		}
	}
	return m.confirmFrom(&m.opts, start, ttl)
}

// Release gives back every key this grant still holds, waking their
// waiters. ErrNotHeld if any key no longer held this grant (the others are
// released all the same). Like Lock.Release it runs on a context detached
// from ctx, bounded by the release timeout.
func (m *MultiLock) Release(_ context.Context) error {
	if m == nil {
		return ErrNotHeld
	}
	n, err := m.releaseGroups(m.groups)
	m.lost()
	switch {
	case err != nil:
		return err
	case n < len(m.keys):
		return ErrNotHeld
	}
	return nil
}

// RunMulti is Run for a MultiLock: it obtains all keys with ObtainMulti,
// runs fn while renewing the whole set every WithRefreshInterval (default
// TTL/3), and releases the set when fn returns. If a renewal finds any key
// gone, or renewals cannot get through before ValidUntil, fn's ctx is
// cancelled and RunMulti returns an error matching ErrLockLost, as Run does.
func (c *Client) RunMulti(ctx context.Context, keyList []string, ttl time.Duration, fn func(ctx context.Context, m *MultiLock) error, opts ...Option) error {
	if fn == nil {
		return invalid("nil fn")
	}
	interval, err := c.renewInterval(ttl, opts)
	if err != nil {
		return err
	}
	m, err := c.ObtainMulti(ctx, keyList, ttl, opts...)
	if err != nil {
		return err
	}
	return lease.RunLock(ctx, multiLease{m}, ttl, func(ctx context.Context) error { return fn(ctx, m) }, lease.WithRefreshInterval(interval))
}

// multiLease is a MultiLock as lease.RunLock needs it: its renewal, release
// and validity. (Its Key and Fence stand for the whole set.)
type multiLease struct{ *MultiLock }

func (m multiLease) Key() string  { return strings.Join(m.keys, ",") }
func (m multiLease) Fence() int64 { return 0 }
