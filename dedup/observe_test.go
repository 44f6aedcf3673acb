package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/dedup"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
)

// jobLog records the outcome of every Do.
type jobLog struct{ lines []string }

func (r *jobLog) JobDone(_ context.Context, e observe.JobEvent) {
	r.lines = append(r.lines, fmt.Sprintf("%s %s fenced=%v err=%v", e.ID, e.Outcome, e.Fence > 0, e.Err != nil))
}

// downStore is a Store that cannot be reached.
type downStore struct{ lease.Store }

func (downStore) Get(context.Context, string) (lease.Record, error) {
	return lease.Record{}, errors.New("store down")
}

// A Group reports how each Do ended: ran, duplicate (of a success or of a
// recorded failure), in progress elsewhere, or a backend error.
func TestObserverOutcomes(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	ctx := context.Background()
	r := &jobLog{}
	g := env.group(dedup.WithObserver(r), dedup.WithScope(dedup.UntilDoneOrFailed))
	ok := func(context.Context, int64) ([]byte, error) { return []byte("v"), nil }
	fail := func(context.Context, int64) ([]byte, error) { return nil, errors.New("job failed") }
	_, _ = g.Do(ctx, "a", ok)
	_, _ = g.Do(ctx, "a", ok)
	_, _ = g.Do(ctx, "b", fail)
	_, _ = g.Do(ctx, "b", fail)

	// A duplicate while the job runs.
	started, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, "c", func(context.Context, int64) ([]byte, error) {
			close(started)
			<-finish
			return nil, nil
		})
		done <- err
	}()
	<-started
	_, err := g.Do(ctx, "c", ok)
	require.ErrorIs(t, err, dedup.ErrInProgress, "Do while the job runs, want ErrInProgress")
	close(finish)
	require.NoError(t, <-done)

	down, err := dedup.New(env.m, downStore{env.m}, dedup.WithObserver(r))
	require.NoError(t, err)
	_, err = down.Do(ctx, "d", ok)
	require.Error(t, err, "Do on a store that is down succeeded")
	want := []string{
		"a ran fenced=true err=false", "a duplicate fenced=true err=false",
		"b ran fenced=true err=true", "b duplicate fenced=true err=true",
		"c in_progress fenced=false err=true", "c ran fenced=true err=false",
		"d error fenced=false err=true",
	}
	assert.Equal(t, fmt.Sprint(want), fmt.Sprint(r.lines), "events:\n got %q\nwant %q", r.lines, want)
}

// A value that is no JobObserver is refused.
func TestObserverInvalid(t *testing.T) {
	t.Parallel()
	env := newMemEnv(t)
	_, err := dedup.New(env.m, env.m, dedup.WithObserver("not an observer"))
	assert.ErrorIs(t, err, lease.ErrInvalidArgument, "WithObserver(string), want ErrInvalidArgument")
}
