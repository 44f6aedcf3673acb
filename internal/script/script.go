// Package script runs redislock's Lua scripts (package scripts) with typed
// arguments and replies. It knows keys, tokens and milliseconds, never a
// lock or a client. Every script is sent with EVALSHA, by the digest a
// server named for it, and falls back to EVAL on NOSCRIPT (after SCRIPT
// FLUSH or a restart), through Script.Run: no SHA-1 is computed in the
// process (load.go).
package script

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/scripts"
)

var (
	obtainFast   = newFast(withPrelude(scripts.Obtain))
	proposeFast  = newFast(withPrelude(scripts.Propose))
	refreshFast  = newFast(scripts.Refresh.Source())
	releaseFast  = newFast(withPrelude(scripts.Release))
	ttlFast      = newFast(scripts.TTL.Source())
	obtain       = obtainFast.script
	refresh      = refreshFast.script
	release      = releaseFast.script
	inspect      = newScript(scripts.Inspect.Source())
	fairObtain   = newScript(withPrelude(scripts.FairObtain))
	fairLeave    = newScript(withPrelude(scripts.FairLeave))
	multiObtain  = newScript(withPrelude(scripts.MultiObtain))
	multiRefresh = newScript(scripts.MultiRefresh.Source())
	multiRelease = newScript(withPrelude(scripts.MultiRelease))
	multiTTL     = newScript(scripts.MultiTTL.Source())
	fencedSet    = newScript(withPrelude(scripts.FencedSet))
	recordGet    = newScript(scripts.RecordGet.Source())
	recordDelete = newScript(withPrelude(scripts.RecordDelete))
)

// Publish is how a release wakes waiters (release.lua's ARGV[3],
// multi_release.lua's and fair_leave.lua's ARGV[2]), boxed once: it is an
// argument of every release.
type Publish = any

// The ways a release wakes waiters.
var (
	PublishNone    Publish = ""  // no wake-up (quorum mode)
	PublishPlain   Publish = "p" // PUBLISH
	PublishSharded Publish = "s" // SPUBLISH (Redis 7+)
)

// release.lua's ways to wake the waiters of a fair lock: its queue's head.
var (
	publishPlainFair   any = "pq"
	publishShardedFair any = "sq"
)

// unexpected is the error of a reply that no version of a script sends.
func unexpected(name string, reply any) error {
	return fmt.Errorf("redislock: unexpected %s reply %v", name, reply)
}

// ints reads a reply of integers into dst and returns how many there
// were; a reply longer than dst, or with anything but integers, is an error.
// An integer may come as its decimal string: the scripts send fences above
// 2^53 so, as a Lua number (a double) would not hold them exactly.
func ints(dst []int64, name string, res []any, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	if len(res) > len(dst) {
		return 0, unexpected(name, res)
	}
	for i, r := range res {
		n, ok := intOf(r)
		if !ok {
			return 0, unexpected(name, res)
		}
		dst[i] = n
	}
	return len(res), nil
}

// intOf reads one integer of a reply: an integer, or its decimal string.
func intOf(r any) (int64, bool) {
	switch r := r.(type) {
	case int64:
		return r, true
	case string:
		n, err := strconv.ParseInt(r, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// Refresh extends the lock at key (boxed) to ms milliseconds if it holds
// token (refresh.lua). held reports whether it did.
func Refresh(ctx context.Context, rdb redis.Scripter, key []any, token any, ms int64) (held bool, err error) {
	n, err := refreshFast.runInt(ctx, rdb, len(key), append(refreshFast.args(key, 2), token, ms))
	return n == 1, err
}

// Release gives the lock back if it holds token and wakes its waiters
// (release.lua) as publish says, naming the fair queue's head when fair:
// the key becomes a released record for recordTTL ms (an int64, boxed
// once); keys are {lock}, in fair mode {lock, queue}, boxed. released
// reports whether the grant was released by this call or an earlier run of
// it.
func Release(ctx context.Context, rdb redis.Scripter, keys []any, token, recordTTL any, publish Publish, fair bool) (released bool, err error) {
	a := append(releaseFast.args(keys, 3), token, recordTTL)
	switch {
	case publish == PublishNone:
	case fair && publish == PublishSharded:
		a = append(a, publishShardedFair)
	case fair:
		a = append(a, publishPlainFair)
	default:
		a = append(a, publish)
	}
	n, err := releaseFast.runInt(ctx, rdb, len(keys), a)
	return n == 1, err
}

// Handoff is a release that hands the lock over (release.lua with a
// handoff): the grant To takes the lock with the next fence, in the same
// step. Where that cannot be written (out of memory) or made (the grant's
// fence is 2^63-1: no fence is left), the lock is released as Release
// does, without fair queue.
type Handoff struct {
	Keys      []any   // {lock}, boxed
	Token     any     // the grant handed over
	RecordTTL any     // of the released record, should it come to that (an int64, boxed once)
	Publish   Publish // how that release wakes waiters
	To        any     // the new grant's token
	TTL       any     // its lease in ms (an int64, boxed once)
	Holder    any     // its holder identity (a string, "" for none); nil: none
}

// Run sends the handoff (release.lua). released reports whether Token's
// grant was released, by this call or an earlier run of it; fence > 0
// that the lock passed to To with that fence, 0 that it was released
// without handoff.
func (h Handoff) Run(ctx context.Context, rdb redis.Scripter) (released bool, fence int64, err error) {
	holder := h.Holder
	if holder == nil {
		holder = ""
	}
	n, err := releaseFast.runInt(ctx, rdb, len(h.Keys), append(releaseFast.args(h.Keys, 6), h.Token, h.RecordTTL, h.Publish, h.To, h.TTL, holder))
	switch {
	case err != nil:
		return false, 0, err
	case n >= 2:
		return true, n, nil
	}
	return n == 1, 0, nil
}

// ttlNotHeld is ttl.lua's and multi_ttl.lua's reply for a grant that does
// not hold the lock.
const ttlNotHeld = -3

// TTL returns the lock's PTTL in milliseconds if it holds token (ttl.lua;
// key boxed); held is false otherwise.
func TTL(ctx context.Context, rdb redis.Scripter, key []any, token any) (ms int64, held bool, err error) {
	n, err := ttlFast.runInt(ctx, rdb, len(key), append(ttlFast.args(key, 1), token))
	if err != nil {
		return 0, false, err
	}
	return n, n != ttlNotHeld, nil
}

// Inspect reads the lock at keys {lock, queue} (inspect.lua): its value
// and PTTL, or exists false when the lock key is absent; and queued, the
// size of its fair queue.
func Inspect(ctx context.Context, rdb redis.Scripter, keys []string) (value string, pttl int64, exists bool, queued int64, err error) {
	res, err := inspect.Run(ctx, rdb, keys).Slice()
	if err != nil {
		return "", 0, false, 0, err
	}
	switch len(res) {
	case 2:
		n, ok := res[1].(int64)
		if !ok {
			break
		}
		return "", 0, false, n, nil
	case 3:
		ms, ok1 := res[0].(int64)
		v, ok2 := res[1].(string)
		n, ok3 := res[2].(int64)
		if !ok1 || !ok2 || !ok3 {
			break
		}
		return v, ms, true, n, nil
	}
	return "", 0, false, 0, unexpected("inspect", res)
}

// FairLeave takes ticket out of the fair queue (fair_leave.lua); keys are
// {lock, wake, queue, qexp}.
func FairLeave(ctx context.Context, rdb redis.Scripter, keys []string, ticket string, publish Publish) error {
	return fairLeave.Run(ctx, rdb, keys, ticket, publish).Err()
}
