package script

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/keys"
)

// obtain.lua and propose.lua read fences below 2^53 as Lua numbers (fence.lua) and
// as decimal strings above: around the boundary, and on a carry through
// every digit, each grant's fence is exactly the last + 1 (or the
// proposal), in the reply and in the key, and a proposal not above the
// last fence is refused with it.
func TestObtainScriptFenceBoundaries(t *testing.T) {
	t.Parallel()
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "boundary")
		released := func(last int64) {
			t.Helper()
			require.NoError(t, rdb.Set(ctx, k.Lock, "~:"+strconv.FormatInt(last, 10)+": 0123456789ab", time.Minute).Err())
		}
		stored := func(fence int64, rel ...string) {
			t.Helper()
			v := rdb.Get(ctx, k.Lock).Val()
			if want := "tok:" + strconv.FormatInt(fence, 10) + ":" + append(rel, " 0123456789ab")[0] + ":;"; v != want {
				t.Fatalf("lock key %q, want %q", v, want)
			}
		}
		const b = 1 << 53
		for _, last := range []int64{9, 99, 999999999999999, 9999999999999999, b - 3, b - 2, b - 1, b, b + 1} {
			released(last)
			r, err := Obtain{Keys: k.Boxed[:1], Token: "tok", TTL: 10000}.Run(ctx, rdb)
			require.NoError(t, err, "after %d: %+v; want fence %d", last, r, last+1)
			require.Equal(t, Status(Granted), r.Status, "after %d: %+v, %v; want fence %d", last, r, err, last+1)
			require.Equal(t, last+1, r.Fence, "after %d: %+v, %v; want fence %d", last, r, err, last+1)
			stored(last + 1)
		}
		for _, c := range []struct{ last, proposal int64 }{
			{2, 3}, {b - 2, b - 1}, {b - 1, b}, {b, b + 1}, {b - 1, b + 100}, {123, b + 5}, {9999999999999999, 10000000000000000},
		} {
			for _, low := range []int64{c.last, c.last - 1} {
				released(c.last)
				r, err := Obtain{Keys: k.Boxed[:1], Token: "tok", TTL: 10000, Proposal: low, Holder: ""}.Run(ctx, rdb)
				require.NoError(t, err, "proposal %d after %d: %+v; want refused with %d", low, c.last, r, c.last)
				require.Equal(t, Status(LowProposal), r.Status, "proposal %d after %d: %+v, %v; want refused with %d", low, c.last, r, err, c.last)
				require.Equal(t, c.last, r.Counter, "proposal %d after %d: %+v, %v; want refused with %d", low, c.last, r, err, c.last)
			}
			r, err := Obtain{Keys: k.Boxed[:1], Token: "tok", TTL: 10000, Proposal: c.proposal, Holder: ""}.Run(ctx, rdb)
			require.NoError(t, err, "proposal %d after %d: %+v; want granted", c.proposal, c.last, r)
			require.Equal(t, Status(Granted), r.Status, "proposal %d after %d: %+v, %v; want granted", c.proposal, c.last, r, err)
			require.Equal(t, c.proposal, r.Fence, "proposal %d after %d: %+v, %v; want granted", c.proposal, c.last, r, err)
			stored(c.proposal)
		}
		// A fresh key: the server clock in µs; a proposal is taken as is.
		rdb.Del(ctx, k.Lock)
		before := time.Now().Add(-time.Minute).UnixMicro()
		r, err := Obtain{Keys: k.Boxed[:1], Token: "tok", TTL: 10000}.Run(ctx, rdb)
		require.NoError(t, err, "fresh key: %+v; want a fence from the clock", r)
		require.Equal(t, Status(Granted), r.Status, "fresh key: %+v, %v; want a fence from the clock", r, err)
		require.GreaterOrEqual(t, r.Fence, before, "fresh key: %+v, %v; want a fence from the clock", r, err)
		require.LessOrEqual(t, r.Fence, int64(math.MaxInt64/2), "fresh key: %+v, %v; want a fence from the clock", r, err)
		stored(r.Fence, "")
	})
}

// A handoff (release.lua) passes the lock with the exact next fence, on
// Lua numbers below 2^53 and on decimal strings above: on both sides of
// the boundary, with and without a waiter's mark and with up to 8 releases
// remembered, the handed-over token is named first among the releases (7
// older ones kept) and the mark is carried on. A grant at fence 2^63-1 has
// no fence left to hand over: it is released.
func TestHandoffScriptFenceBoundaries(t *testing.T) {
	t.Parallel()
	eachScriptTarget(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		k := keys.New("redislock:", "handoff-boundary")
		const b = 1 << 53
		const from = "fromtoken0123456789"
		for _, last := range []int64{9, 99999999999999, 999999999999999, 9999999999999999, b - 3, b - 2, b - 1, b, b + 1, 1e18 - 1, math.MaxInt64 - 1, math.MaxInt64} {
			for _, rel := range []string{"", " 0123456789ab", " 111111111111 222222222222 333333333333 444444444444 555555555555 666666666666 777777777777 888888888888"} {
				for _, mark := range []string{"", "*"} {
					grant := from + ":" + strconv.FormatInt(last, 10) + ":" + rel + ":holder;" + mark
					require.NoError(t, rdb.Set(ctx, k.Lock, grant, time.Minute).Err())
					released, fence, err := Handoff{Keys: k.Boxed[:1], Token: from, RecordTTL: 60000, Publish: PublishPlain, To: "tok", TTL: 10000, Holder: "h"}.Run(ctx, rdb)
					require.NoError(t, err)
					assert.True(t, released, grant)
					kept := rel
					if len(kept) > 7*13 {
						kept = kept[:7*13]
					}
					want := "tok:" + strconv.FormatInt(last+1, 10) + ": " + from[:12] + kept + ":h;" + mark
					if last == math.MaxInt64 {
						want = "~:" + strconv.FormatInt(last, 10) + ": " + from[:12] + kept
						assert.Zero(t, fence, grant)
					} else {
						assert.Equal(t, last+1, fence, grant)
					}
					assert.Equal(t, want, rdb.Get(ctx, k.Lock).Val(), grant)
					if last < math.MaxInt64 {
						// A replay answers the same fence.
						_, again, err := Handoff{Keys: k.Boxed[:1], Token: from, RecordTTL: 60000, Publish: PublishPlain, To: "tok", TTL: 10000, Holder: "h"}.Run(ctx, rdb)
						require.NoError(t, err)
						assert.Equal(t, last+1, again, "replay of "+grant)
					}
				}
			}
		}
	})
}
