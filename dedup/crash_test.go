package dedup_test

import (
	"context"
	"errors"
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
)

// crashRole makes the re-executed test binary a worker, with the default
// options, whose job never returns; its spec is "redisAddr|jobID".
const crashRole = "dedup-crash"

// TestCrashingWorkerProcess is the worker side of TestKilledWorkerRecovered:
// it runs only as a child process. Its job emits "RUNNING" and blocks
// until the parent kills the process.
func TestCrashingWorkerProcess(t *testing.T) {
	t.Parallel()
	spec, ok := proctest.Child(crashRole)
	if !ok {
		t.Skip("only runs as a child process of TestKilledWorkerRecovered")
	}
	addr, id, _ := strings.Cut(spec, "|")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c := redislock.New(rdb)
	g, err := dedup.New(c.Locker(), c.Store(), dedup.WithHolder("crashing"))
	require.NoError(t, err)
	_, err = g.Do(context.Background(), id, func(context.Context, int64) ([]byte, error) {
		proctest.Emit("RUNNING")
		select {} // until killed
	})
	t.Fatalf("the job returned: %v", err)
}

// A worker process is killed (SIGKILL) while it runs a job, on a real
// redis-server, with the default lease. Another worker that delivers the
// job again after each InProgressError's RetryAfter, as a queue with
// delayed redelivery would, runs the job at its second delivery: the first
// one's RetryAfter is the crashed worker's lease left (at most
// DefaultLease) and 1 ms, and no more is needed.
func TestKilledWorkerRecovered(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const id = "invoice-7"
	p := proctest.Start(t, "TestCrashingWorkerProcess", crashRole, srv.Addr()+"|"+id)
	next(t, p, "RUNNING")
	p.Signal(t, syscall.SIGKILL)
	assert.Error(t, p.Wait(t), "the killed worker's exit")
	killed := time.Now()

	ctx := ctxFor(t)
	w := redisWorkers(t, []*redistest.Server{srv}, 1)[0]
	var delays []time.Duration
	for {
		r, err := w.Do(ctx, id, func(context.Context, int64) ([]byte, error) { return []byte("recovered"), nil })
		var busy *dedup.InProgressError
		if errors.As(err, &busy) {
			require.Equal(t, "crashing", busy.Holder)
			require.Positive(t, busy.TTL)
			require.LessOrEqual(t, busy.TTL, dedup.DefaultLease)
			require.Equal(t, busy.TTL+time.Millisecond, busy.RetryAfter)
			delays = append(delays, busy.RetryAfter)
			require.Len(t, delays, 1, "delivered again after %v and still held", delays)
			// The delay under test: the worker delivers the job again
			// once RetryAfter has passed, which no event announces.
			select {
			case <-time.After(busy.RetryAfter):
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
			continue
		}
		require.NoError(t, err)
		assert.True(t, r.Ran)
		assert.Equal(t, "recovered", string(r.Value))
		break
	}
	require.Len(t, delays, 1, "the job ran at once: the killed worker held nothing")
	t.Logf("recovered %v after the kill (RetryAfter %v, DefaultLease %v)", time.Since(killed).Round(time.Millisecond), delays[0], dedup.DefaultLease)
}
