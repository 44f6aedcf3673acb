package nodes_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/nodes"
)

// wrapped is the error a Set's Wrap makes: the node and op it was told.
type wrapped struct {
	node int
	op   string
	err  error
}

func (w *wrapped) Error() string { return fmt.Sprintf("node %d %s: %v", w.node, w.op, w.err) }
func (w *wrapped) Unwrap() error { return w.err }

func newSet(t *testing.T, n int) *nodes.Set {
	return &nodes.Set{Nodes: newNodes(t, n), Live: newPool(t, 8*n), Wrap: func(_ context.Context, node int, op string, err error) error {
		return &wrapped{node, op, err}
	}}
}

// Value returns f's value by value; a call its caller stopped waiting for
// returns the zero value and the wrapped error at once, and its onLate
// gets what f returned once f has.
func TestValue(t *testing.T) {
	t.Parallel()
	s := newSet(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	add := func(_ context.Context, _ redis.Scripter, n int) (int, error) { return n + 1, nil }
	v, err := nodes.Value(ctx, s, s.Nodes[0], time.Minute, false, "add", 41, add, nil)
	require.NoError(t, err)
	assert.Equal(t, 42, v)

	release := make(chan struct{})
	type late struct {
		v   int
		err error
	}
	lates := make(chan late, 1)
	v, err = nodes.ValueOf(ctx, s, s.Nodes[0], 10*time.Millisecond, false, "slow", func(context.Context, redis.Scripter) (int, error) {
		<-release
		return 7, nil
	}, func(_ context.Context, v int, err error) { lates <- late{v, err} })
	var w *wrapped
	require.ErrorAs(t, err, &w)
	assert.Equal(t, "slow", w.op)
	assert.True(t, nodes.IsLate(err), "%v is not late", err)
	assert.True(t, nodes.NoOutcome(err))
	assert.Zero(t, v)
	close(release)
	select {
	case l := <-lates:
		assert.Equal(t, late{7, nil}, l)
	case <-time.After(10 * time.Second):
		t.Fatal("onLate was not told the late call's value")
	}
}

// Decide returns once a majority said yes, without waiting for the node
// that has not answered; answered hears that node's outcome when it
// comes.
func TestDecideAtMajority(t *testing.T) {
	t.Parallel()
	s := newSet(t, 3)
	release := make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	defer time.AfterFunc(10*time.Second, unblock).Stop() // a Decide that waits for node 2 fails, not hangs
	told := make(chan int, 3)
	ok, errs := nodes.Decide(context.Background(), s, nil, time.Minute, false, "yes",
		func(_ context.Context, _ redis.Scripter, node int) (bool, error) {
			if node == 2 {
				<-release
			}
			return true, nil
		},
		func(yes bool) bool { return yes },
		func(_ context.Context, node int, _ bool, err error) {
			assert.NoError(t, err)
			told <- node
		})
	assert.Equal(t, 2, ok)
	assert.Empty(t, errs)
	unblock()
	seen := map[int]bool{}
	for range 3 {
		select {
		case n := <-told:
			seen[n] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("answered heard of %v only", seen)
		}
	}
}

// A call that Fanout refused comes wrapped; an error a call returned
// (wrapped already) comes as it is.
func TestReplyErr(t *testing.T) {
	t.Parallel()
	s := newSet(t, 1)
	var w *wrapped
	require.ErrorAs(t, nodes.ReplyErr(context.Background(), s, nodes.Reply[int]{Node: 0, Err: nodes.ErrBusy}, "op"), &w)
	assert.ErrorIs(t, w, nodes.ErrBusy)
	other := errors.New("other")
	assert.Equal(t, other, nodes.ReplyErr(context.Background(), s, nodes.Reply[int]{Err: other}, "op"))
}
