package script

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// FencedSet writes value at key unless a higher fence wrote it
// (fenced_set.lua): written, or the newest fence that refused it.
func FencedSet(ctx context.Context, rdb redis.Scripter, key []string, value any, fence, ttlMS int64) (written bool, newest int64, err error) {
	res, err := fencedSet.Run(ctx, rdb, key, value, fence, ttlMS).Slice()
	if err != nil {
		return false, 0, err
	}
	if len(res) == 2 {
		ok, isInt := res[0].(int64)
		if f, good := fenceOf(res[1]); isInt && good {
			return ok == 1, f, nil
		}
	}
	return false, 0, unexpected("fenced_set", res)
}

// fenceOf reads a fence the scripts send as its decimal string (exact over
// the whole int64 range, where a Lua number is not).
func fenceOf(v any) (int64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseInt(s, 10, 64)
	return f, err == nil
}

// Record is a fenced record as record_get.lua reads it.
type Record struct {
	Value string
	Fence int64
	PTTL  int64 // ms; NoExpiry: none
}

// RecordGet reads the record at key (record_get.lua); found is false when
// there is none.
func RecordGet(ctx context.Context, rdb redis.Scripter, key []string) (r Record, found bool, err error) {
	res, err := recordGet.Run(ctx, rdb, key).Slice()
	if err != nil || len(res) == 0 {
		return Record{}, false, err
	}
	if len(res) != 3 {
		return Record{}, false, unexpected("record_get", res)
	}
	v, ok1 := res[0].(string)
	f, ok2 := fenceOf(res[1])
	pttl, ok3 := res[2].(int64)
	if !ok1 || !ok2 || !ok3 {
		return Record{}, false, unexpected("record_get", res)
	}
	return Record{Value: v, Fence: f, PTTL: pttl}, true, nil
}

// RecordDelete deletes the record at key unless a higher fence wrote it
// (record_delete.lua): newer is that fence, 0 when deleted or absent.
func RecordDelete(ctx context.Context, rdb redis.Scripter, key []string, fence int64) (newer int64, err error) {
	res, err := recordDelete.Run(ctx, rdb, key, fence).Result()
	if err != nil {
		return 0, err
	}
	if n, ok := res.(int64); ok && n == 0 {
		return 0, nil
	}
	if f, ok := fenceOf(res); ok {
		return f, nil
	}
	return 0, unexpected("record_delete", res)
}
