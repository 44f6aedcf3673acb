package nodes_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/nodes"
)

// A pool runs at most max tasks at once and refuses more without waiting;
// Close waits for the busy workers, and later tasks run on the caller's
// goroutine; after Stop it refuses every task.
func TestPoolBounds(t *testing.T) {
	t.Parallel()
	p := nodes.NewPool(2)
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	for range 2 {
		require.True(t, p.TryGo(func() { started <- struct{}{}; <-release }), "a pool with a free worker refused a task")
	}
	<-started
	<-started
	require.False(t, p.TryGo(func() { t.Error("a task ran beyond the pool's bound") }), "a pool with every worker busy took a task")
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while its workers were busy")
	default:
	}
	close(release)
	<-closed
	ran := false
	require.True(t, p.TryGo(func() { ran = true }), "after Close, a task did not run on the caller's goroutine")
	require.True(t, ran, "after Close, a task did not run on the caller's goroutine")

	s := nodes.NewPool(2)
	s.Stop()
	require.False(t, s.TryGo(func() { t.Error("a task ran after Stop") }), "a stopped pool took a task")
}

// The clean-up calls of a node are bounded by MaxCleanup, and by the pool.
func TestBackgroundBounds(t *testing.T) {
	t.Parallel()
	n := newNodes(t, 1)[0]
	pool := newPool(t, nodes.MaxCleanup+1)
	release := make(chan struct{})
	defer close(release)
	for i := range nodes.MaxCleanup {
		require.True(t, n.Background(pool, func() { <-release }), "clean-up %d refused", i+1)
	}
	if _, cleaning := n.InFlight(); cleaning != nodes.MaxCleanup {
		t.Fatalf("%d clean-ups in flight, want %d", cleaning, nodes.MaxCleanup)
	}
	require.False(t, n.Background(pool, func() { t.Error("a clean-up ran past MaxCleanup") }), "a clean-up past MaxCleanup was taken")
	full := newPool(t, 0)
	if n2 := newNodes(t, 1)[0]; n2.Background(full, func() {}) {
		t.Fatal("a clean-up was taken by a pool without a free worker")
	} else if _, cleaning := n2.InFlight(); cleaning != 0 {
		t.Fatalf("a refused clean-up is still counted: %d", cleaning)
	}
}
