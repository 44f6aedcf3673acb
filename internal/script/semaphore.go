package script

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/scripts"
)

// The semaphore's scripts, each behind the prelude they share.
var (
	semAcquire = semaphoreScript(scripts.SemaphoreAcquire.Source())
	semRefresh = semaphoreScript(scripts.SemaphoreRefresh.Source())
	semRelease = semaphoreScript(scripts.SemaphoreRelease.Source())
	semTTL     = semaphoreScript(scripts.SemaphoreTTL.Source())
	semInspect = semaphoreScript(scripts.SemaphoreInspect.Source())
)

func semaphoreScript(op string) *Script {
	return newScript(scripts.SemaphorePrelude.Source() + "\n" + op)
}

// SemStatus is the outcome of semaphore_acquire.lua.
type SemStatus int8

// The outcomes of a semaphore acquire.
const (
	SemGranted  SemStatus = 1  // a slot is the request's (also on a replay)
	SemQueued   SemStatus = 0  // no slot for it now
	SemMismatch SemStatus = -1 // the semaphore is in use with another limit
)

// SemAcquire is the request of semaphore_acquire.lua. Keys are the
// semaphore's five keys (semaphore_prelude.lua).
type SemAcquire struct {
	Keys     []string
	Token    string // the request's ticket, and the permit's token if granted
	TTL      int64  // lease in ms
	Limit    int
	QueueTTL int64  // ms; 0: do not queue (a single attempt)
	Holder   string // holder identity, "" for none
	FenceTTL int64  // ms the fence counter outlives the grant
	Wake     string // the wake channel
}

// SemAcquireReply is semaphore_acquire.lua's answer.
type SemAcquireReply struct {
	Status SemStatus
	Slot   int   // granted
	Fence  int64 // granted
	Rank   int64 // queued: place in the queue, -1 when not queued
	WaitMS int64 // queued: until the earliest lease ends, -1 when unknown
	Limit  int64 // mismatch: the limit the semaphore is in use with
}

// Run sends the request.
func (a SemAcquire) Run(ctx context.Context, rdb redis.Scripter) (SemAcquireReply, error) {
	var v [3]int64
	res, err := semAcquire.Run(ctx, rdb, a.Keys, a.Token, a.TTL, a.Limit, a.QueueTTL, a.Holder, a.FenceTTL, a.Wake).Slice()
	n, err := ints(v[:], "semaphore_acquire", res, err)
	switch {
	case err != nil:
		return SemAcquireReply{}, err
	case n == 3 && SemStatus(v[0]) == SemGranted:
		return SemAcquireReply{Status: SemGranted, Slot: int(v[1]), Fence: v[2]}, nil
	case n == 3 && SemStatus(v[0]) == SemQueued:
		return SemAcquireReply{Status: SemQueued, Rank: v[1], WaitMS: v[2]}, nil
	case n == 2 && SemStatus(v[0]) == SemMismatch:
		return SemAcquireReply{Status: SemMismatch, Limit: v[1]}, nil
	}
	return SemAcquireReply{}, unexpected("semaphore_acquire", res)
}

// semHeld is the reply of semaphore_refresh.lua and semaphore_release.lua
// when the permit was held.
const semHeld = 1

// SemRefresh extends the permit of token to ttlMS from now, if it is still
// held (semaphore_refresh.lua).
func SemRefresh(ctx context.Context, rdb redis.Scripter, keys []string, token string, ttlMS int64, wake string) (held bool, err error) {
	n, err := semRefresh.Run(ctx, rdb, keys, token, ttlMS, wake).Int64()
	return n == semHeld, err
}

// SemRelease gives the permit of token back, or takes token out of the
// queue, and wakes the waiters a freed slot awaits
// (semaphore_release.lua); held reports whether a permit was held.
func SemRelease(ctx context.Context, rdb redis.Scripter, keys []string, token, wake string) (held bool, err error) {
	n, err := semRelease.Run(ctx, rdb, keys, token, wake).Int64()
	return n == semHeld, err
}

// semTTLNotHeld is semaphore_ttl.lua's reply for a permit not held.
const semTTLNotHeld = -1

// SemTTL returns the remaining lease of the permit of token in ms
// (semaphore_ttl.lua); held is false when it is not held.
func SemTTL(ctx context.Context, rdb redis.Scripter, keys []string, token string) (ms int64, held bool, err error) {
	n, err := semTTL.Run(ctx, rdb, keys, token).Int64()
	if err != nil {
		return 0, false, err
	}
	return n, n != semTTLNotHeld, nil
}

// SemHolder is one holder as semaphore_inspect.lua reports it.
type SemHolder struct {
	Slot   int
	Fence  int64
	Holder string
	TTL    int64 // ms of lease left
	Age    int64 // ms since the grant
}

// SemInfo is semaphore_inspect.lua's answer.
type SemInfo struct {
	Limit   int64 // 0 when no one holds or waits
	Waiters int64
	Holders []SemHolder // by slot
}

// SemInspect reads the semaphore at keys (semaphore_inspect.lua).
func SemInspect(ctx context.Context, rdb redis.Scripter, keys []string) (SemInfo, error) {
	res, err := semInspect.Run(ctx, rdb, keys).Result()
	if err != nil {
		return SemInfo{}, err
	}
	bad := func() (SemInfo, error) { return SemInfo{}, unexpected("semaphore_inspect", res) }
	top, ok := res.([]any)
	if !ok || len(top) != 3 {
		return bad()
	}
	limit, ok1 := top[0].(int64)
	waiters, ok2 := top[1].(int64)
	list, ok3 := top[2].([]any)
	if !ok1 || !ok2 || !ok3 {
		return bad()
	}
	info := SemInfo{Limit: limit, Waiters: waiters}
	for _, e := range list {
		h, ok := e.([]any)
		if !ok || len(h) != 5 {
			return bad()
		}
		slot, ok1 := h[0].(int64)
		fence, ok2 := h[1].(int64)
		holder, ok3 := h[2].(string)
		ttl, ok4 := h[3].(int64)
		age, ok5 := h[4].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
			return bad()
		}
		info.Holders = append(info.Holders, SemHolder{Slot: int(slot), Fence: fence, Holder: holder, TTL: ttl, Age: age})
	}
	return info, nil
}
