package proctest_test

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/proctest"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
)

// A test binary killed with SIGKILL (no cleanup of its runs) leaves none
// of its children alive: not the redis-server it started, not the test
// binary it ran again as a child.
func TestChildrenDieWithAKilledParent(t *testing.T) {
	t.Parallel()
	redistest.Binary(t)
	parent := proctest.Start(t, "TestParentProcess", "parent", "")
	var serverPid, childPid int
	_, err := fmt.Sscanf(parent.Next(t), "PIDS %d %d", &serverPid, &childPid)
	require.NoError(t, err)
	server, child := proctest.Track(t, serverPid), proctest.Track(t, childPid)
	require.False(t, server.Exited(0), "redis-server not running before its parent died")
	require.False(t, child.Exited(0), "the child not running before its parent died")

	parent.Signal(t, syscall.SIGKILL)
	require.Error(t, parent.Wait(t))
	require.True(t, server.Exited(testkit.Bound), "redis-server %d outlived its killed parent", serverPid)
	require.True(t, child.Exited(testkit.Bound), "child test binary %d outlived its killed parent", childPid)
}

// TestParentProcess is the parent killed: it starts a redis-server and a
// child, says their pids and waits to be killed.
func TestParentProcess(t *testing.T) {
	if _, ok := proctest.Child("parent"); !ok {
		t.Skip("only runs as a child process")
	}
	srv := redistest.Start(t)
	child := proctest.Start(t, "TestIdleProcess", "idle", "")
	require.Equal(t, "READY", child.Next(t))
	proctest.Emit("PIDS %d %d", srv.PID(), child.Pid())
	for range proctest.Commands() { // until killed
	}
}

// TestIdleProcess is a child that runs until it is killed.
func TestIdleProcess(t *testing.T) { proctest.Idle(t, "idle") }
