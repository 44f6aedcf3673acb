package semaphore

import (
	"embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// load returns the script of one operation: the prelude, then its file.
func load(op string) *redis.Script {
	prelude, err := scriptFiles.ReadFile("scripts/prelude.lua")
	if err != nil {
		panic(err)
	}
	body, err := scriptFiles.ReadFile("scripts/" + op + ".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(prelude) + "\n" + string(body))
}

var (
	acquireScript = load("acquire")
	refreshScript = load("refresh")
	releaseScript = load("release")
	ttlScript     = load("ttl")
	inspectScript = load("inspect")
)

// The status of an acquire reply.
const (
	acquireGranted  = 1
	acquireQueued   = 0
	acquireMismatch = -1
)

// acquireReply is acquire.lua's reply: {1, slot, fence}, {0, rank, wait}
// or {-1, limit}.
type acquireReply struct {
	status int64
	slot   int   // granted
	fence  int64 // granted
	rank   int64 // queued: place in the queue, -1 when not queued
	waitMS int64 // queued: until the earliest lease ends, -1 when unknown
	limit  int64 // mismatch: the limit the semaphore is in use with
}

func parseAcquire(v []int64) (acquireReply, error) {
	if len(v) < 2 || v[0] != acquireMismatch && len(v) != 3 {
		return acquireReply{}, fmt.Errorf("redislock: semaphore: unexpected acquire reply %v", v)
	}
	switch v[0] {
	case acquireGranted:
		return acquireReply{status: acquireGranted, slot: int(v[1]), fence: v[2]}, nil
	case acquireQueued:
		return acquireReply{status: acquireQueued, rank: v[1], waitMS: v[2]}, nil
	case acquireMismatch:
		return acquireReply{status: acquireMismatch, limit: v[1]}, nil
	}
	return acquireReply{}, fmt.Errorf("redislock: semaphore: unexpected acquire reply %v", v)
}

// Replies of refresh.lua and release.lua.
const (
	replyHeld    = 1
	replyNotHeld = 0
)

// ttlNotHeld is ttl.lua's reply for a permit that is not held.
const ttlNotHeld = -1

// parseInspect reads inspect.lua's reply {limit, waiters, {{slot, fence,
// holder, ttl ms, age ms}...}}.
func parseInspect(v any) (limit, waiters int64, holders []Holder, err error) {
	bad := func() (int64, int64, []Holder, error) {
		return 0, 0, nil, fmt.Errorf("redislock: semaphore: unexpected inspect reply %v", v)
	}
	top, ok := v.([]any)
	if !ok || len(top) != 3 {
		return bad()
	}
	limit, ok1 := top[0].(int64)
	waiters, ok2 := top[1].(int64)
	list, ok3 := top[2].([]any)
	if !ok1 || !ok2 || !ok3 {
		return bad()
	}
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
		holders = append(holders, Holder{Slot: int(slot), Fence: fence, Holder: holder, TTL: ms(ttl), Age: ms(age)})
	}
	return limit, waiters, holders, nil
}
