package script

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/scripts"
)

var joinFast = newFast(withPrelude(scripts.Join))

// JoinReply is join.lua's answer: what a node did with a grant it was
// asked to join.
type JoinReply int8

// join.lua's replies.
const (
	NotJoined   JoinReply = 0 // another grant holds the key, or this grant was released there
	Extended    JoinReply = 1 // the node held the grant already: extended
	Joined      JoinReply = 2 // the key was free, untouched by any later attempt: the node holds the grant now
	JoinedAbove JoinReply = 3 // the key was free, but a later attempt reached the node: it holds the grant now, its last fence kept
)

// Join brings a quorum node into the grant token with fence (join.lua):
// the key (boxed) is extended to ms milliseconds if it holds the grant,
// taken if it is free; holder is the grant's holder identity (a string,
// "" for none), boxed.
func Join(ctx context.Context, rdb redis.Scripter, key []any, token any, ms, fence int64, holder any) (JoinReply, error) {
	if holder == nil {
		holder = ""
	}
	n, err := joinFast.runInt(ctx, rdb, len(key), append(joinFast.args(key, 4), token, ms, fence, holder))
	if err != nil {
		return NotJoined, err
	}
	switch r := JoinReply(n); r {
	case NotJoined, Extended, Joined, JoinedAbove:
		return r, nil
	}
	return NotJoined, unexpected("join", n)
}
