package leader_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/leader"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/leasetest"
)

// meetingPairs are (prefix, name) pairs built to collide: each group's
// prefix and name, joined as they are or with '|' between them, spell one
// string.
var meetingPairs = [][][2]string{
	{{"", "leader:jobs:1"}, {"leader:", "jobs:1"}, {"leader:jobs:", "1"}},
	{{"a|", "b"}, {"a", "|b"}, {"", "a||b"}},
	{{"%7C", "x"}, {"|", "x"}},
	{{"{t}", "1"}, {"{", "t}1"}},
}

// Elections whose prefix and name would spell one key are separate
// elections: each has no leader until its own candidate wins, and all
// lead at once, in a Memory and on a real redis-server.
func TestPrefixedKeysNeverMeet(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		electionsApart(t, leasetest.NewMemory())
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		c := redislock.New(srv.Client(nil))
		t.Cleanup(func() { _ = c.Close() })
		electionsApart(t, c.Locker())
	})
}

func electionsApart(t *testing.T, locker lease.Locker) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var won []*leader.Term
	defer func() {
		for _, term := range won {
			assert.NoError(t, term.Resign(ctx))
		}
	}()
	for _, group := range meetingPairs {
		for _, pair := range group {
			id := pair[0] + " / " + pair[1]
			e, err := leader.New(locker, pair[1], leader.WithPrefix(pair[0]), leader.WithHolder(id))
			require.NoError(t, err)
			info, err := e.Leader(ctx)
			require.ErrorIs(t, err, leader.ErrNoLeader, "prefix %q, name %q: led by %q", pair[0], pair[1], info.Identity)
			term, err := e.Campaign(ctx)
			require.NoError(t, err, "prefix %q, name %q", pair[0], pair[1])
			won = append(won, term)
			info, err = e.Leader(ctx)
			require.NoError(t, err)
			assert.Equal(t, id, info.Identity)
			assert.Equal(t, lease.Key(pair[0], pair[1]), e.Key())
		}
	}
}
