package redislock

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/internal/nodes"
	"github.com/redislock-go/redislock/internal/script"
	"github.com/redislock-go/redislock/lease/backend"
	"github.com/redislock-go/redislock/observe"
)

// MultiLock is one grant of several keys, obtained all or nothing by
// ObtainMulti: one token, one lease, and a fence per key. Its methods act on
// the whole set, are safe for concurrent use, and a nil *MultiLock answers
// ErrNotHeld.
type MultiLock struct {
	c      *Client
	s      *single
	keys   []string      // as the caller gave them
	groups [][]keys.Lock // canonical order; each group is one script call
	fences map[string]int64
	token  string
	arg    any // token, boxed once
	opts   options

	validity
	watch backend.ReleaseWatch // ends RunMulti's renewal on Release
}

// ObtainMulti takes the locks on all keys at once, as one lock: either it
// holds every key when it returns, or none. The keys must be distinct and
// non-empty; there must be at least one. Retries, waiting (notified or
// polling), errors and ValidUntil are as for Obtain; while waiting, it waits
// for the key that was found held.
//
// On a standalone Redis (or Sentinel) one atomic script checks and takes
// every key. On Redis Cluster each key's Redis keys carry a hash tag of
// their own, the whole key ("{order:7}:a" becomes
// "redislock:{{order:7%7D:a}": braces in a key do not pick its slot), so
// distinct keys share a slot only by chance. There it takes the keys one
// slot at a time in a canonical (sorted) order and, when one is held,
// gives back those it took before waiting: a holder never waits while
// holding, so {a,b} and {b,a} cannot deadlock. A competing ObtainMulti may
// briefly see some of the keys held by a set that is then rolled back;
// keys that happen to share a slot are taken in one script.
//
// Quorum mode and WithFair are not supported (errors matching
// ErrInvalidArgument).
func (c *Client) ObtainMulti(ctx context.Context, keyList []string, ttl time.Duration, opts ...Option) (m *MultiLock, err error) {
	o, err := c.callOptions(opts)
	if err != nil {
		return nil, err
	}
	s := c.single
	if s == nil {
		return nil, invalid("ObtainMulti is not supported in quorum mode")
	}
	switch {
	case o.fair:
		return nil, invalid("ObtainMulti does not support WithFair")
	case o.replicas > 0:
		return nil, invalid("ObtainMulti does not support WithReplicas")
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
	if _, err := o.checkCall(ttl); err != nil {
		return nil, err
	}
	token := rand.Text()
	m = &MultiLock{
		c:      c,
		s:      s,
		keys:   slices.Clone(keyList),
		groups: s.slotGroups(o.prefix, keyList),
		token:  token,
		arg:    token,
		opts:   o,
	}
	attempts := 0
	if obs := c.obs; obs != nil {
		start, key := time.Now(), m.key()
		ctx = obs.obtainStart(ctx, observe.ObtainStartEvent{Key: key, TTL: ttl})
		defer func() {
			obs.obtainDone(ctx, observe.ObtainDoneEvent{Key: key, TTL: ttl, Attempts: attempts, Wait: time.Since(start), Err: err})
		}()
	}

	deadline := o.waitDeadline(ctx)
	ws := c.newWaitState(&o, func(ctx context.Context) error { return m.obtainOnce(ctx, ttl) }, nil)
	defer ws.stop()
	for attempts = 1; ; attempts++ {
		if attempts > 1 {
			if err := deadline.Expired(); err != nil {
				return nil, err // no attempt starts after the wait limit
			}
		}
		err := m.obtainOnce(ctx, ttl)
		if !errors.Is(err, ErrNotObtained) {
			if err != nil && ctx.Err() != nil {
				return nil, ended(ctx, m.key(), attempts > 1, err)
			}
			if err != nil {
				return nil, err
			}
			return m.deliver(ctx, attempts > 1)
		}
		wait, werr := o.nextWait(&deadline, attempts, err)
		if werr != nil {
			return nil, werr
		}
		switch granted, err := ws.waitRetry(ctx, wait, err); {
		case granted:
			return m.deliver(ctx, true)
		case err != nil:
			return nil, err
		}
	}
}

// key names the lock's keys as one, in errors and events.
func (m *MultiLock) key() string { return strings.Join(m.keys, ",") }

// onNode runs f for m on the Client's node, bounded by timeout, and
// returns its value (nodes.Value).
func onNode[T any](ctx context.Context, m *MultiLock, timeout time.Duration, op string, f func(ctx context.Context, rdb redis.Scripter) (T, error),
	onLate func(ctx context.Context, v T, err error)) (T, error) {
	return nodes.ValueOf(ctx, &m.c.set, m.s.n, timeout, m.opts.autoPipeline, op, f, onLate)
}

// obtainOnce makes one all-or-nothing attempt: nil with every key granted
// and valid, a *heldError when a key is held, or another error. Whatever it
// may have granted is released unless it returns nil.
func (m *MultiLock) obtainOnce(ctx context.Context, ttl time.Duration) error {
	start := time.Now()
	ms := ttl.Milliseconds()
	fences := make(map[string]int64, len(m.keys))
	for gi, g := range m.groups {
		ks := locksOf(g)
		rep, err := onNode(ctx, m, m.s.nodeTimeout(&m.opts, ttl), "obtain", func(ctx context.Context, rdb redis.Scripter) (script.MultiObtainReply, error) {
			return script.MultiObtain(ctx, rdb, ks, m.arg, ms, m.opts.holder)
		}, func(ctx context.Context, _ script.MultiObtainReply, _ error) {
			_, _ = m.release(ctx, m.groups[gi:gi+1])
		})
		switch {
		case err != nil:
			// Release the groups taken before and this group, whose
			// script may have run: at once, unless it never went out, or
			// it still runs (the onLate above releases it once it has
			// returned).
			taken := gi + 1
			if nodes.NoOutcome(err) {
				taken = gi
			}
			m.releaseLater(ctx, m.groups[:taken])
			return err
		case !rep.Granted:
			m.release(ctx, m.groups[:gi])
			if rep.PTTL == script.NoExpiry {
				return m.c.nodeErr(ctx, 0, "obtain", errNoExpiry)
			}
			return heldFor(g[rep.HeldAt], rep.PTTL)
		}
		for i, k := range g {
			fences[k.Lock] = rep.Fences[i]
		}
	}
	m.fences = make(map[string]int64, len(m.keys))
	for _, k := range m.keys {
		m.fences[k] = fences[keys.New(m.opts.prefix, k).Lock]
	}
	if err := m.confirmFrom(&m.opts, start, ttl); err != nil {
		m.release(ctx, m.groups)
		return err
	}
	return nil
}

// releaseLater gives back the groups in the background, on the clean-up
// pool (inBackground), on ctx without its cancellation.
func (m *MultiLock) releaseLater(ctx context.Context, groups [][]keys.Lock) {
	if len(groups) == 0 {
		return
	}
	ctx = background(ctx)
	_ = m.c.inBackground(ctx, m.key(), m.s.n, func() { _, _ = m.release(ctx, groups) })
}

// release gives back the given groups now, one script call each
// (multi_release.lua), each bounded by the release timeout on ctx without
// its cancellation; it returns how many keys were deleted and the first
// error.
func (m *MultiLock) release(ctx context.Context, groups [][]keys.Lock) (released int, err error) {
	ctx = detach(ctx)
	for _, g := range groups {
		ks := make([]string, 0, 3*len(g))
		for _, k := range g {
			ks = append(ks, k.Lock, k.Wake, k.Queue())
		}
		n, e := onNode(ctx, m, m.opts.releaseTimeout, "release", func(ctx context.Context, rdb redis.Scripter) (int, error) {
			return script.MultiRelease(ctx, rdb, ks, m.arg, m.s.publish(&m.opts), recordTTL(m.currentTTL(), m.opts.releaseTimeout, nil))
		}, nil)
		switch {
		case e == nil:
			released += n
		case err == nil:
			err = e
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
// (see Lock.ValidUntil); the zero Time, for good, once the set is known not
// to be held.
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
		p, err := onNode(ctx, m, m.s.nodeTimeout(&m.opts, m.currentTTL()), "ttl", func(ctx context.Context, rdb redis.Scripter) (p pttl, err error) {
			p.ms, p.held, err = script.MultiTTL(ctx, rdb, locksOf(g), m.arg)
			return p, err
		}, nil)
		ms, held := p.ms, p.held
		switch {
		case err != nil:
			return 0, err
		case !held:
			m.lost()
			return 0, ErrNotHeld
		case least < 0 || ms < least:
			least = ms
		}
	}
	return time.Duration(least) * time.Millisecond, nil
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
		held, err := onNode(ctx, m, m.s.nodeTimeout(&m.opts, ttl), "refresh", func(ctx context.Context, rdb redis.Scripter) (bool, error) {
			return script.MultiRefresh(ctx, rdb, locksOf(g), m.arg, ms)
		}, nil)
		if err != nil {
			return err
		}
		if !held {
			m.lost()
			_, _ = m.release(ctx, m.groups)
			return ErrNotHeld
		}
	}
	return m.confirmFrom(&m.opts, start, ttl)
}

// Release gives back every key this grant still holds, waking their
// waiters. ErrNotHeld if any key no longer held this grant (the others are
// released all the same). Like Lock.Release it runs on ctx without its
// cancellation, bounded by the release timeout.
func (m *MultiLock) Release(ctx context.Context) error {
	if m == nil || m.releasing() {
		return ErrNotHeld
	}
	m.watch.Released() // RunMulti's fn: the set is given up
	n, err := m.release(ctx, m.groups)
	if err == nil && n < len(m.keys) {
		err = ErrNotHeld
	}
	m.endRelease(err)
	return err
}
