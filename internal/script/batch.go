package script

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/scripts"
)

var batchRefresh = redis.NewScript(scripts.BatchRefresh)

// BatchStatus is batch_refresh.lua's reply for one key.
type BatchStatus int8

// The replies of batch_refresh.lua, per key.
const (
	BatchRenewed   BatchStatus = 1  // extended
	BatchNotHeld   BatchStatus = 0  // absent, or another grant
	BatchWrongType BatchStatus = -1 // a value that is not a string: not a lock of ours
)

// BatchRefresh extends each lock of keys (all in one Cluster slot) to ms
// milliseconds if it still holds tokens[i] (batch_refresh.lua), and returns
// dst with one status per key appended, in keys' order. An error reply
// (a bad TTL, a token count that does not match) touches no key.
func BatchRefresh(ctx context.Context, rdb redis.Scripter, keys, tokens []string, ms int64, dst []BatchStatus) ([]BatchStatus, error) {
	args := make([]any, 1, len(tokens)+1)
	args[0] = ms
	for _, t := range tokens {
		args = append(args, t)
	}
	res, err := batchRefresh.Run(ctx, rdb, keys, args...).Slice()
	if err != nil {
		return dst, err
	}
	if len(res) != len(keys) {
		return dst, unexpected("batch_refresh", res)
	}
	for _, r := range res {
		n, ok := r.(int64)
		if !ok || n < int64(BatchWrongType) || n > int64(BatchRenewed) {
			return dst, unexpected("batch_refresh", res)
		}
		dst = append(dst, BatchStatus(n))
	}
	return dst, nil
}
