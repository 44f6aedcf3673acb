package main_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/semaphore"
)

// run --slots N: at most N commands at once, each with its slot.
func TestRunSlots(t *testing.T) {
	srv, _, rdb := server(t)
	script := `echo "$REDISLOCK_SLOT $REDISLOCK_FENCE"; read x || true`
	a := start(t, "--addr", srv.Addr(), "run", "--slots", "2", "--holder", "a", "transcoders", "--", "sh", "-c", script)
	b := start(t, "--addr", srv.Addr(), "run", "--slots", "2", "--holder", "b", "transcoders", "--", "sh", "-c", script)
	var slotA, slotB int
	var fenceA, fenceB, fenceC int64
	fmt.Sscan(a.line(), &slotA, &fenceA)
	fmt.Sscan(b.line(), &slotB, &fenceB)
	require.NotEqual(t, slotB, slotA, "two holders: slots %d, %d, fences %d, %d", slotA, slotB, fenceA, fenceB)
	require.GreaterOrEqual(t, slotA, 0, "two holders: slots %d, %d, fences %d, %d", slotA, slotB, fenceA, fenceB)
	require.LessOrEqual(t, slotA, 1, "two holders: slots %d, %d, fences %d, %d", slotA, slotB, fenceA, fenceB)
	require.GreaterOrEqual(t, slotB, 0, "two holders: slots %d, %d, fences %d, %d", slotA, slotB, fenceA, fenceB)
	require.LessOrEqual(t, slotB, 1, "two holders: slots %d, %d, fences %d, %d", slotA, slotB, fenceA, fenceB)
	require.NotEqual(t, fenceB, fenceA, "two holders: slots %d, %d, fences %d, %d", slotA, slotB, fenceA, fenceB)
	sem, err := semaphore.New(rdb, "transcoders", 2)
	require.NoError(t, err)
	defer sem.Close()
	info, err := sem.Inspect(context.Background())
	require.NoError(t, err, "the library's semaphore sees %+v (), want the two runs", info)
	require.Len(t, info.Holders, 2, "the library's semaphore sees %+v (%v), want the two runs", info, err)

	// Full: --nonblock exits with the conflict code; a third run waits.
	if code, _, stderr := result(t, "--addr", srv.Addr(), "run", "--slots", "2", "--nonblock", "transcoders", "--", "true"); code != 75 || !strings.Contains(stderr, "2 of 2 slots held") {
		t.Errorf("full, --nonblock: exit %d, %s", code, stderr)
	}
	if code, _, stderr := result(t, "--addr", srv.Addr(), "run", "--slots", "3", "--nonblock", "transcoders", "--", "true"); code != 64 {
		t.Errorf("another N while in use: exit %d (%s), want 64", code, stderr)
	}
	c := start(t, "--addr", srv.Addr(), "run", "--slots", "2", "-v", "transcoders", "--", "sh", "-c", script)
	c.stderr.waitFor(t, "waiting for")
	a.stdin.Close()
	if code := a.wait(); code != 0 {
		t.Fatalf("a exited %d", code)
	}
	var slotC int
	fmt.Sscan(c.line(), &slotC, &fenceC)
	assert.False(t, slotC != slotA || fenceC <= max(fenceA, fenceB), "the third run got slot %d fence %d; want a's slot %d and a higher fence", slotC, fenceC, slotA)
	b.stdin.Close()
	c.stdin.Close()
	require.Equal(t, 0, b.wait(), "b or c failed")
	require.Equal(t, 0, c.wait(), "b or c failed")
	if code, _, _ := result(t, "--quorum", srv.Addr()+","+srv.Addr(), "run", "--slots", "2", "k", "--", "true"); code != 64 {
		t.Errorf("--slots with --quorum: exit %d, want 64", code)
	}
}
