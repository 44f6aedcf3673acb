package stampede_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/leasetest"
	"github.com/redislock-go/redislock/observe"
	"github.com/redislock-go/redislock/stampede"
)

// cacheLog records a Group's cache and fill events.
type cacheLog struct {
	mu    sync.Mutex
	lines []string
}

type fillKey struct{}

func (r *cacheLog) add(line string) {
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
}

func (r *cacheLog) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

func (r *cacheLog) CacheDone(_ context.Context, e observe.CacheEvent) {
	r.add(fmt.Sprintf("%s %s err=%v", e.Key, e.Result, e.Err != nil))
}

func (r *cacheLog) FillStart(ctx context.Context, e observe.FillStartEvent) context.Context {
	r.add(fmt.Sprintf("%s fill refresh=%v", e.Key, e.Refresh))
	return context.WithValue(ctx, fillKey{}, e.Key)
}

func (r *cacheLog) FillDone(ctx context.Context, e observe.FillDoneEvent) {
	r.add(fmt.Sprintf("%s filled refresh=%v err=%v ctx=%v", e.Key, e.Refresh, e.Err != nil, ctx.Value(fillKey{}) == e.Key))
}

func (r *cacheLog) want(t *testing.T, want ...string) {
	t.Helper()
	if got := r.take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
}

// A Group reports how each Do was answered (filled, hit, waited for
// another process's fill, error) and each fill, whose function runs on the
// context FillStart returned.
func TestObserverCacheAndFills(t *testing.T) {
	t.Parallel()
	ev := watch()
	m := memory()
	ctx := context.Background()
	r := &cacheLog{}
	g := newGroup(t, m, m, stampede.WithObserver(r), ev.option())
	other := newGroup(t, m, m, ev.option()) // another process
	var fillCtxOK bool
	fill := func(ctx context.Context) ([]byte, error) {
		fillCtxOK = ctx.Value(fillKey{}) == "k"
		return []byte("v"), nil
	}
	_, err := g.Do(ctx, "k", time.Minute, fill)
	require.NoError(t, err)
	r.want(t, "k fill refresh=false", "k filled refresh=false err=false ctx=true", "k filled err=false")
	assert.True(t, fillCtxOK, "the fill did not run on the context FillStart returned")
	_, err = g.Do(ctx, "k", time.Minute, fill)
	require.NoError(t, err)
	r.want(t, "k hit err=false")

	// Another process fills; this one waits for it.
	gt := newGate("w", nil)
	theirs := callers(ctx, other, 1, "w", time.Minute, gt.fill)
	<-gt.started
	ours := callers(ctx, g, 1, "w", time.Minute, fill)
	ev.wait(t, stampede.EvWait, 1)
	close(gt.open)
	for _, rs := range [][]result{collect(t, theirs), collect(t, ours)} {
		if rs[0].err != nil || string(rs[0].val) != "w" {
			t.Fatalf("Do = %q, %v", rs[0].val, rs[0].err)
		}
	}
	r.want(t, "w waited err=false")

	failing := func(context.Context) ([]byte, error) { return nil, errors.New("no value") }
	_, err = g.Do(ctx, "f", time.Minute, failing)
	require.ErrorIs(t, err, stampede.ErrFillFailed, "Do with a failing fill")
	r.want(t, "f fill refresh=false", "f filled refresh=false err=true ctx=true", "f error err=true")
}

// An early refresh is reported as a fill with Refresh set; the Do that
// started it was a hit.
func TestObserverRefresh(t *testing.T) {
	t.Parallel()
	ev := watch()
	clock := leasetest.NewFakeClock(time.Time{})
	m := memory(leasetest.WithClock(clock))
	ctx := context.Background()
	r := &cacheLog{}
	g := newGroup(t, m, m, stampede.WithObserver(r), stampede.WithEarlyRefresh(2*time.Second), ev.option())
	fill := func(context.Context) ([]byte, error) { return []byte("v"), nil }
	_, err := g.Do(ctx, "k", 10*time.Second, fill)
	require.NoError(t, err)
	clock.Advance(9 * time.Second) // 1 s left: due for refresh
	_, err = g.Do(ctx, "k", 10*time.Second, fill)
	require.NoError(t, err)
	ev.wait(t, stampede.EvStored, 2)
	got := r.take()
	slices.Sort(got[3:]) // the hit and the refresh race
	want := []string{"k fill refresh=false", "k filled refresh=false err=false ctx=true", "k filled err=false",
		"k fill refresh=true", "k filled refresh=true err=false ctx=true", "k hit err=false"}
	assert.Equal(t, fmt.Sprint(want), fmt.Sprint(got), "events:\n got %q\nwant %q", got, want)
}

// A value that observes nothing of a Group is refused.
func TestObserverInvalid(t *testing.T) {
	t.Parallel()
	m := memory()
	_, err := stampede.New(m, m, stampede.WithObserver("not an observer"))
	assert.ErrorIs(t, err, lease.ErrInvalidArgument, "WithObserver(string), want ErrInvalidArgument")
}
