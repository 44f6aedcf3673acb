package script

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// MultiObtainReply is multi_obtain.lua's answer.
type MultiObtainReply struct {
	Granted bool
	Fences  []int64 // Granted: one per lock, in the order of the request
	HeldAt  int     // not Granted: the index of the first lock found held
	PTTL    int64   // not Granted: that lock's PTTL (NoExpiry: none)
}

// MultiObtain takes the locks of one slot at once, all or nothing
// (multi_obtain.lua); keys are the lock keys.
func MultiObtain(ctx context.Context, rdb redis.Scripter, keys []string, token any, ms int64, holder any) (MultiObtainReply, error) {
	res, err := multiObtain.Run(ctx, rdb, keys, token, ms, holder).Slice()
	v := make([]int64, max(len(keys)+1, 3))
	n, err := ints(v, "multi_obtain", res, err)
	switch {
	case err != nil:
		return MultiObtainReply{}, err
	case n == len(keys)+1 && v[0] == 1:
		return MultiObtainReply{Granted: true, Fences: v[1:n]}, nil
	case n == 3 && v[0] == 0 && v[1] >= 1 && int(v[1]) <= len(keys):
		return MultiObtainReply{HeldAt: int(v[1]) - 1, PTTL: v[2]}, nil
	}
	return MultiObtainReply{}, unexpected("multi_obtain", res)
}

// MultiRefresh extends the locks at keys if all hold token
// (multi_refresh.lua).
func MultiRefresh(ctx context.Context, rdb redis.Scripter, keys []string, token any, ms int64) (held bool, err error) {
	n, err := multiRefresh.Run(ctx, rdb, keys, token, ms).Int64()
	return n == 1, err
}

// MultiRelease gives back the locks that hold token and wakes their
// waiters (multi_release.lua): each becomes a released record for
// recordTTL ms; keys are {lock1, wake1, queue1, ...}. It returns how many
// were released by this call or an earlier run of it.
func MultiRelease(ctx context.Context, rdb redis.Scripter, keys []string, token any, publish Publish, recordTTL any) (int, error) {
	return multiRelease.Run(ctx, rdb, keys, token, publish, recordTTL).Int()
}

// MultiTTL returns the least PTTL of the locks at keys if all hold token
// (multi_ttl.lua).
func MultiTTL(ctx context.Context, rdb redis.Scripter, keys []string, token any) (ms int64, held bool, err error) {
	n, err := multiTTL.Run(ctx, rdb, keys, token).Int64()
	if err != nil {
		return 0, false, err
	}
	return n, n != ttlNotHeld, nil
}
