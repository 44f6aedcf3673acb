package script

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/keys"
	"github.com/redislock-go/redislock/scripts"
)

var batchRefresh = newScript(scripts.BatchRefresh.Source())

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
// per node serving them): with EVALSHA, or EVAL while no server has named
// the script's digest (Script.Run does not work in a pipeline); a batch
// whose script was not loaded (NOSCRIPT) is sent again with EVAL on its
// own. Each batch gets its own outcome.
func BatchRefreshPipelined(ctx context.Context, rdb redis.UniversalClient, ms int64, batches []Batch) {
	batchPipelined(ctx, rdb, batchRefresh, ms, batches)
}

// batchPipelined is BatchRefreshPipelined with s as batch_refresh.lua.
func batchPipelined(ctx context.Context, rdb redis.UniversalClient, s *Script, ms int64, batches []Batch) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batches))
	d := s.sha.Load()
	for i, b := range batches {
		if d == nil {
			cmds[i] = pipe.Eval(ctx, s.src, b.Keys, batchArgs(b.Tokens, ms)...)
		} else {
			cmds[i] = pipe.EvalSha(ctx, d.hex, b.Keys, batchArgs(b.Tokens, ms)...)
		}
	}
	_, _ = pipe.Exec(ctx) // every command has its own error
	if d == nil && len(cmds) > 0 {
		s.learn(ctx, rdb, batches[0].Keys, cmds[0].Err())
	}
	for i, cmd := range cmds {
		b := &batches[i]
		res, err := cmd.Slice()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			res, err = rdb.Eval(ctx, s.src, b.Keys, batchArgs(b.Tokens, ms)...).Slice()
		}
		if err != nil {
			b.Err = err
			continue
		}
		b.Status, b.Err = batchStatus(res, len(b.Keys), b.Status[:0])
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

// BatchRefreshKeys reports whether cmd runs batch_refresh.lua (by EVALSHA,
// or EVAL), and how many keys it renews; for the go-redis hooks of tests
// and benchmarks that count renewal calls.
func BatchRefreshKeys(cmd redis.Cmder) (keys int, ok bool) {
	args := cmd.Args()
	if len(args) < 3 {
		return 0, false
	}
	name, _ := args[0].(string)
	payload, _ := args[1].(string)
	switch {
	case strings.EqualFold(name, "eval") && payload == batchRefresh.src:
	case strings.EqualFold(name, "evalsha") && payload != "" && payload == batchRefresh.Digest():
	default:
		return 0, false
	}
	n, _ := args[2].(int)
	return n, true
}
