package script

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/scripts"
)

var batchRefresh = redis.NewScript(scripts.BatchRefresh.Source())

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
	res, err := batchRefresh.Run(ctx, rdb, keys, batchArgs(tokens, ms)...).Slice()
	if err != nil {
		return dst, err
	}
	return batchStatus(res, len(keys), dst)
}

func batchArgs(tokens []string, ms int64) []any {
	args := make([]any, 1, len(tokens)+1)
	args[0] = ms
	for _, t := range tokens {
		args = append(args, t)
	}
	return args
}

func batchStatus(res []any, n int, dst []BatchStatus) ([]BatchStatus, error) {
	if len(res) != n {
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

// Batch is one batch_refresh.lua call of BatchRefreshPipelined: Keys (one
// Cluster slot) and their Tokens in; Status (one per key) or Err out.
type Batch struct {
	Keys, Tokens []string
	Status       []BatchStatus
	Err          error
}

// BatchRefreshPipelined runs BatchRefresh for every batch, to ms
// milliseconds, in one pipeline of rdb (on a Cluster client, one pipeline
// per node serving them); a batch whose script was not loaded (NOSCRIPT)
// is sent again with EVAL on its own. Each batch gets its own outcome.
func BatchRefreshPipelined(ctx context.Context, rdb redis.UniversalClient, ms int64, batches []Batch) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batches))
	for i, b := range batches {
		cmds[i] = pipe.EvalSha(ctx, batchRefresh.Hash(), b.Keys, batchArgs(b.Tokens, ms)...)
	}
	_, _ = pipe.Exec(ctx) // every command has its own error
	for i, cmd := range cmds {
		b := &batches[i]
		res, err := cmd.Slice()
		switch {
		case redis.HasErrorPrefix(err, "NOSCRIPT"):
			b.Status, b.Err = BatchRefresh(ctx, rdb, b.Keys, b.Tokens, ms, b.Status[:0])
		case err != nil:
			b.Err = err
		default:
			b.Status, b.Err = batchStatus(res, len(b.Keys), b.Status[:0])
		}
	}
}

// SlotBatches splits keys and their tokens into the batches of
// BatchRefreshPipelined: by Cluster slot when cluster is true, else all in
// one; in their order. index tells where each batch's keys are in keys.
func SlotBatches(keyList, tokens []string, cluster bool) (batches []Batch, index [][]int) {
	at := map[uint16]int{}
	for i, k := range keyList {
		j := 0
		if cluster {
			s := keys.Slot(k)
			var ok bool
			if j, ok = at[s]; !ok {
				j = len(batches)
				at[s] = j
				batches, index = append(batches, Batch{}), append(index, nil)
			}
		} else if len(batches) == 0 {
			batches, index = append(batches, Batch{}), append(index, nil)
		}
		b := &batches[j]
		b.Keys, b.Tokens, index[j] = append(b.Keys, k), append(b.Tokens, tokens[i]), append(index[j], i)
	}
	return batches, index
}
