package nodes_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/nodes"
)

// newNodes returns n nodes on clients that no test dials (their calls
// here do not use them), closed when the test ends.
func newNodes(t *testing.T, n int) []*nodes.Node {
	t.Helper()
	ns := make([]*nodes.Node, n)
	for i := range ns {
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		ns[i] = nodes.New(i, rdb, nil)
		t.Cleanup(func() { ns[i].Close(); _ = rdb.Close() })
	}
	return ns
}

func newPool(t *testing.T, max int) *nodes.Pool {
	p := nodes.NewPool(max)
	t.Cleanup(p.Close)
	return p
}

func indexes[T any](rs []nodes.Reply[T]) []int {
	var is []int
	for _, r := range rs {
		is = append(is, r.Node)
	}
	slices.Sort(is)
	return is
}

// Every node's reply is gathered, with its value, and none is missing.
func TestGatherEveryReply(t *testing.T) {
	t.Parallel()
	ns := newNodes(t, 3)
	r := nodes.Fanout(newPool(t, 8), ns, func(n *nodes.Node) (int, error) { return 10 * n.Index, nil })
	rs, missing := r.Gather(time.Minute, nil)
	r.Stop(nil)
	if missing != nil || !slices.Equal(indexes(rs), []int{0, 1, 2}) {
		t.Fatalf("replies of %v, missing %v; want all three", indexes(rs), missing)
	}
	for _, rep := range rs {
		require.Equal(t, 10*rep.Node, rep.Val, "node %d replied %d %v", rep.Node, rep.Val, rep.Err)
		require.False(t, rep.Err != nil, "node %d replied %d %v", rep.Node, rep.Val, rep.Err)
	}
}

// Gather ends when stop says so; the replies not gathered, whether they
// arrive later or are already waiting, go to the late handler, each once.
func TestStopHandsLateReplies(t *testing.T) {
	t.Parallel()
	ns := newNodes(t, 3)
	pool := newPool(t, 8)
	release := make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	t.Cleanup(let) // before the pool's Close, on a failure too
	r := nodes.Fanout(pool, ns, func(n *nodes.Node) (int, error) {
		if n.Index != 0 {
			<-release
		}
		return n.Index, nil
	})
	rs, missing := r.Gather(time.Minute, func(nodes.Reply[int]) bool { return true })
	require.True(t, slices.Equal(indexes(rs), []int{0}), "gathered %v, missing %v; want [0], [1 2]", indexes(rs), missing)
	require.True(t, slices.Equal(missing, []int{1, 2}), "gathered %v, missing %v; want [0], [1 2]", indexes(rs), missing)
	late := make(chan nodes.Reply[int], 3)
	r.Stop(func(rep nodes.Reply[int]) { late <- rep })
	let()
	got := []int{(<-late).Node, (<-late).Node}
	slices.Sort(got)
	require.True(t, slices.Equal(got, []int{1, 2}), "late replies of %v, want [1 2]", got)

	// With one worker, nodes 1 and 2 are answered ErrBusy within Fanout:
	// node 2's reply waits, not gathered, when Stop comes.
	release2 := make(chan struct{})
	pool1 := newPool(t, 1)
	let2 := sync.OnceFunc(func() { close(release2) })
	t.Cleanup(let2) // before the pool's Close, on a failure too
	r = nodes.Fanout(pool1, ns, func(n *nodes.Node) (int, error) {
		<-release2
		return n.Index, nil
	})
	rs, _ = r.Gather(time.Minute, func(nodes.Reply[int]) bool { return true })
	require.Len(t, rs, 1, "gathered %+v, want node 1's ErrBusy", rs)
	require.Equal(t, 1, rs[0].Node, "gathered %+v, want node 1's ErrBusy", rs)
	var now []int
	r.Stop(func(rep nodes.Reply[int]) { now = append(now, rep.Node); late <- rep })
	require.True(t, slices.Equal(now, []int{2}), "Stop handed %v at once, want the waiting reply of node 2", now)
	<-late
	let2()
	if rep := <-late; rep.Node != 0 {
		t.Fatalf("late reply of node %d, want 0", rep.Node)
	}
}

// Gather stops waiting after its timeout and names the nodes not heard
// from; their replies, when they come, go to the late handler.
func TestGatherTimeout(t *testing.T) {
	t.Parallel()
	ns := newNodes(t, 3)
	pool := newPool(t, 8)
	release := make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	t.Cleanup(let) // before the pool's Close, on a failure too
	var answering sync.WaitGroup
	answering.Add(2)
	r := nodes.Fanout(pool, ns, func(n *nodes.Node) (int, error) {
		if n.Index == 1 {
			<-release // cannot answer before the timeout
		} else {
			answering.Done()
		}
		return n.Index, nil
	})
	answering.Wait() // nodes 0 and 2 are answering: the timeout is node 1's
	rs, missing := r.Gather(100*time.Millisecond, nil)
	require.True(t, slices.Equal(indexes(rs), []int{0, 2}), "gathered %v, missing %v; want [0 2], [1]", indexes(rs), missing)
	require.True(t, slices.Equal(missing, []int{1}), "gathered %v, missing %v; want [0 2], [1]", indexes(rs), missing)
	late := make(chan nodes.Reply[int], 1)
	r.Stop(func(rep nodes.Reply[int]) { late <- rep })
	let()
	if rep := <-late; rep.Node != 1 {
		t.Fatalf("late reply of node %d, want 1", rep.Node)
	}
}

// A fan-out call that finds no free worker in the pool, or a node with
// MaxLive fan-out calls in flight, is answered ErrBusy at once.
func TestFanoutBusy(t *testing.T) {
	t.Parallel()
	ns := newNodes(t, 2)
	release := make(chan struct{})
	defer close(release)
	r := nodes.Fanout(newPool(t, 1), ns, func(n *nodes.Node) (int, error) {
		<-release
		return 0, nil
	})
	rs, _ := r.Gather(time.Millisecond, nil)
	r.Stop(nil)
	require.Len(t, rs, 1, "with one worker, busy with node 0: %+v, want node 1 ErrBusy", rs)
	require.Equal(t, 1, rs[0].Node, "with one worker, busy with node 0: %+v, want node 1 ErrBusy", rs)
	require.ErrorIs(t, rs[0].Err, nodes.ErrBusy, "with one worker, busy with node 0: %+v, want node 1 ErrBusy", rs)

	n := ns[1:]
	pool := newPool(t, nodes.MaxLive+1)
	for i := range nodes.MaxLive {
		nodes.Fanout(pool, n, func(*nodes.Node) (int, error) { <-release; return 0, nil }).Stop(nil)
		if fanned, _ := n[0].InFlight(); fanned != i+1 {
			t.Fatalf("%d fan-out calls in flight after %d", fanned, i+1)
		}
	}
	r = nodes.Fanout(pool, n, func(*nodes.Node) (int, error) { return 0, nil })
	rs, _ = r.Gather(time.Minute, nil)
	r.Stop(nil)
	require.Len(t, rs, 1, "call %d on a node: %+v, want ErrBusy", nodes.MaxLive+1, rs)
	require.ErrorIs(t, rs[0].Err, nodes.ErrBusy, "call %d on a node: %+v, want ErrBusy", nodes.MaxLive+1, rs)
}
