package redislock

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Each script is sent with EVALSHA and falls back to EVAL on NOSCRIPT (after
// SCRIPT FLUSH or a restart), through redis.Script.Run.
var (
	//go:embed scripts/obtain.lua
	obtainSrc    string
	obtainScript = redis.NewScript(obtainSrc)

	//go:embed scripts/refresh.lua
	refreshSrc    string
	refreshScript = redis.NewScript(refreshSrc)

	//go:embed scripts/release.lua
	releaseSrc    string
	releaseScript = redis.NewScript(releaseSrc)

	//go:embed scripts/ttl.lua
	ttlSrc    string
	ttlScript = redis.NewScript(ttlSrc)

	//go:embed scripts/inspect.lua
	inspectSrc    string
	inspectScript = redis.NewScript(inspectSrc)

	//go:embed scripts/record_get.lua
	recordGetSrc    string
	recordGetScript = redis.NewScript(recordGetSrc)

	//go:embed scripts/record_delete.lua
	recordDeleteSrc    string
	recordDeleteScript = redis.NewScript(recordDeleteSrc)

	//go:embed scripts/fenced_set.lua
	fencedSetSrc    string
	fencedSetScript = redis.NewScript(fencedSetSrc)
)

// Scripts of multi-key locks (multi.go) and fair locks (fair.go).
var (
	//go:embed scripts/multi_obtain.lua
	multiObtainSrc    string
	multiObtainScript = redis.NewScript(multiObtainSrc)

	//go:embed scripts/multi_refresh.lua
	multiRefreshSrc    string
	multiRefreshScript = redis.NewScript(multiRefreshSrc)

	//go:embed scripts/multi_release.lua
	multiReleaseSrc    string
	multiReleaseScript = redis.NewScript(multiReleaseSrc)

	//go:embed scripts/multi_ttl.lua
	multiTTLSrc    string
	multiTTLScript = redis.NewScript(multiTTLSrc)
)

var (
	//go:embed scripts/fair_obtain.lua
	fairObtainSrc    string
	fairObtainScript = redis.NewScript(fairObtainSrc)

	//go:embed scripts/fair_leave.lua
	fairLeaveSrc    string
	fairLeaveScript = redis.NewScript(fairLeaveSrc)
)

type opKind uint8

const (
	opObtain opKind = iota
	opFairObtain
	opRefresh
	opRelease
	opTTL
)

// op is one script call on one node for one grant. It is a plain value, so
// passing it around allocates nothing.
type op struct {
	kind     opKind
	l        *Lock
	ms       int64 // obtain, refresh: the TTL in milliseconds
	proposal int64 // obtain: the proposed fence; 0 lets the node mint it
	from     *Lock // obtain: the grant handed over to l (handoff.go), or nil
}

// fenceCounterTTLms is boxed once: it is an argument of every obtain.
var fenceCounterTTLms any = fenceCounterTTL.Milliseconds()

// run sends the op to rdb. Obtain replies two integers, a handoff three
// (see obtain.lua); the others one, in a.
func (o op) run(ctx context.Context, rdb redis.Scripter) (a, b, c int64, err error) {
	l := o.l
	switch o.kind {
	case opObtain:
		if o.from != nil {
			return ints(obtainScript.Run(ctx, rdb, l.keys.obtain[:], l.arg, o.ms, o.proposal, fenceCounterTTLms, l.opts.holder, o.from.arg).Slice())
		}
		return ints(obtainScript.Run(ctx, rdb, l.keys.obtain[:2], l.arg, o.ms, o.proposal, fenceCounterTTLms, l.opts.holder).Slice())
	case opFairObtain:
		return ints(fairObtainScript.Run(ctx, rdb, []string{l.keys.lock, l.keys.fence, l.keys.queue(), l.keys.qexp()},
			l.arg, o.ms, fenceCounterTTLms, l.opts.queueTTL.Milliseconds(), l.opts.ticket.id, l.opts.holder).Slice())
	case opRefresh:
		a, err = refreshScript.Run(ctx, rdb, l.keys.obtain[:1], l.arg, o.ms).Int64()
	case opRelease:
		a, err = releaseScript.Run(ctx, rdb, l.keys.release[:], l.arg, l.opts.publish(l.c.quorum), fenceCounterTTLms, l.opts.queueArg()).Int64()
	case opTTL:
		a, err = ttlScript.Run(ctx, rdb, l.keys.obtain[:1], l.arg).Int64()
	}
	return a, 0, 0, err
}

// ints reads the two- or three-integer reply of the obtain scripts.
func ints(res []any, err error) (a, b, c int64, _ error) {
	if err != nil {
		return 0, 0, 0, err
	}
	var v [3]int64
	ok := len(res) == 2 || len(res) == 3
	for i := 0; ok && i < len(res); i++ {
		v[i], ok = res[i].(int64)
	}
	if !ok {
		return 0, 0, 0, fmt.Errorf("redislock: unexpected obtain reply %v", res)
	}
	return v[0], v[1], v[2], nil
}
