package script

import (
	"context"
	"slices"

	"github.com/redis/go-redis/v9"
)

// FencedSet writes value at key unless a higher fence wrote it
// (fenced_set.lua): written, or the newest fence that refused it.
func FencedSet(ctx context.Context, rdb redis.Scripter, key []string, value any, fence, ttlMS int64) (written bool, newest int64, err error) {
	var v [2]int64
	res, err := fencedSet.Run(ctx, rdb, key, value, fence, ttlMS).Slice()
	n, err := ints(v[:], "fenced_set", res, err)
	if err == nil && n != 2 {
		err = unexpected("fenced_set", slices.Clone(v[:n]))
	}
	return v[0] == 1, v[1], err
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
	v, ok1 := res[0].(string)
	f, ok2 := res[1].(int64)
	pttl, ok3 := res[2].(int64)
	if len(res) != 3 || !ok1 || !ok2 || !ok3 {
		return Record{}, false, unexpected("record_get", res)
	}
	return Record{Value: v, Fence: f, PTTL: pttl}, true, nil
}

// RecordDelete deletes the record at key unless a higher fence wrote it
// (record_delete.lua): newer is that fence, 0 when deleted or absent.
func RecordDelete(ctx context.Context, rdb redis.Scripter, key []string, fence int64) (newer int64, err error) {
	return recordDelete.Run(ctx, rdb, key, fence).Int64()
}
