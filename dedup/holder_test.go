package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/dedup"
	"github.com/redislock-go/redislock/internal/proctest"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/lease"
)

// holderRole makes the re-executed test binary a worker that runs one
// job; its spec is "redisAddr|jobID|sinkKey|leaseMillis".
const holderRole = "dedup-holder"

// TestHolderProcess is the worker side of TestPausedHolderFencedOut: it
// runs only as a child process. Its job emits "RUNNING <fence>", waits for
// the parent's "WRITE" (ignoring its ctx, as a job stuck in a write path
// would), makes its fenced write, emits "WRITE <result>" and returns
// success whatever the write's result; then it emits "DONE <Do's error>"
// and waits for the parent to close its stdin.
func TestHolderProcess(t *testing.T) {
	t.Parallel()
	spec, ok := proctest.Child(holderRole)
	if !ok {
		t.Skip("only runs as a child process of TestPausedHolderFencedOut")
	}
	f := strings.Split(spec, "|")
	ms, _ := strconv.Atoi(f[3])
	rdb := redis.NewClient(&redis.Options{Addr: f[0]})
	defer rdb.Close()
	c := redislock.New(rdb)
	defer c.Close()
	g, err := dedup.New(c.Locker(), c.Store(), dedup.WithLease(time.Duration(ms)*time.Millisecond), dedup.WithHolder("paused"))
	require.NoError(t, err)
	cmds := proctest.Commands()
	_, err = g.Do(context.Background(), f[1], func(ctx context.Context, fence int64) ([]byte, error) {
		proctest.Emit("RUNNING %d", fence)
		if cmd := <-cmds; cmd != "WRITE" {
			return nil, fmt.Errorf("got %q, want WRITE", cmd)
		}
		werr := redislock.FencedSet(context.Background(), rdb, f[2], "paused", fence, 0)
		proctest.Emit("WRITE %s", errText(werr))
		return []byte("paused"), nil // as a job that does not check its write would
	})
	proctest.Emit("DONE %s", errText(err))
	for range cmds { // until the parent closes stdin
	}
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// next returns the argument of the child's next line, which must be kind.
func next(t *testing.T, p *proctest.Proc, kind string) string {
	t.Helper()
	got, arg, _ := strings.Cut(p.Next(t), " ")
	require.Equal(t, kind, got, "%s said %s %s, want %s", p.Name, got, arg, kind)
	return arg
}

// A worker process runs a job and is SIGSTOPped mid-job, past its lease.
// Another worker runs the job (the lease ran out, nothing was recorded),
// writes with its higher fence and records the outcome. The paused worker
// resumes and makes its fenced write: refused; its job returns success,
// whose record is refused too; its Do reports the lost lock and the stale
// fence. Repeats get the successor's outcome.
func TestPausedHolderFencedOut(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const (
		id       = "invoice-42"
		sinkKey  = "sink:invoice-42"
		leaseTTL = 500 * time.Millisecond
	)
	p := proctest.Start(t, "TestHolderProcess", holderRole, fmt.Sprintf("%s|%s|%s|%d", srv.Addr(), id, sinkKey, leaseTTL.Milliseconds()))
	pausedFence, _ := strconv.ParseInt(next(t, p, "RUNNING"), 10, 64)
	p.Signal(t, syscall.SIGSTOP)
	ctx := ctxFor(t)
	rdb := srv.Client(nil)
	successor := redisWorkers(t, []*redistest.Server{srv}, 1, dedup.WithRetry(lease.LinearBackoff(50*time.Millisecond)))[0]
	r, err := successor.Do(ctx, id, func(ctx context.Context, fence int64) ([]byte, error) {
		return []byte("successor"), redislock.FencedSet(ctx, rdb, sinkKey, "successor", fence, 0)
	})
	require.NoError(t, err, "successor: %+v; want a run with a fence above %d", r, pausedFence)
	require.True(t, r.Ran, "successor: %+v, %v; want a run with a fence above %d", r, err, pausedFence)
	require.Greater(t, r.Fence, pausedFence, "successor: %+v, %v; want a run with a fence above %d", r, err, pausedFence)
	p.Signal(t, syscall.SIGCONT)
	p.Send(t, "WRITE")
	if w := next(t, p, "WRITE"); !strings.Contains(w, redislock.ErrStaleFence.Error()) {
		t.Errorf("the paused worker's write: %s, want ErrStaleFence", w)
	}
	done := next(t, p, "DONE")
	// Across the process boundary only the text is left: each joined
	// error's phrase, without a repeated "redislock: " prefix.
	phrase := func(err error) string { return strings.TrimPrefix(err.Error(), "redislock: ") }
	assert.False(t, !strings.Contains(done, phrase(redislock.ErrLockLost)) || !strings.Contains(done, phrase(redislock.ErrStaleFence)), "the paused worker's Do: %s, want ErrLockLost and ErrStaleFence", done)
	if v, f, err := redislock.FencedGet(ctx, rdb, sinkKey); err != nil || v != "successor" || f != r.Fence {
		t.Errorf("sink: %q at fence %d (%v); want the successor's write at %d", v, f, err, r.Fence)
	}
	again, err := successor.Do(ctx, id, func(context.Context, int64) ([]byte, error) { return nil, errors.New("ran again") })
	assert.False(t, err != nil || again.Ran || string(again.Value) != "successor" || again.Fence != r.Fence, "repeat: %+v, %v; want the successor's outcome", again, err)
}
