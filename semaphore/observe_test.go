package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/observe"
	"github.com/redislock-go/redislock/semaphore"
)

// recorder is an Observer of every semaphore event, kept as lines.
type recorder struct {
	mu    sync.Mutex
	lines []string
	ctxOK bool // every AcquireDone got the ctx its AcquireStart returned
}

type startKey struct{}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

func (r *recorder) AcquireStart(ctx context.Context, e observe.AcquireStartEvent) context.Context {
	r.add("start %s %v", e.Semaphore, e.TTL)
	return context.WithValue(ctx, startKey{}, e.Semaphore)
}

func (r *recorder) AcquireDone(ctx context.Context, e observe.AcquireDoneEvent) {
	r.mu.Lock()
	r.ctxOK = ctx.Value(startKey{}) == e.Semaphore
	r.mu.Unlock()
	r.add("done %s %s slot=%d fenced=%v", e.Semaphore, e.Outcome(), e.Slot, e.Fence > 0)
}

func (r *recorder) Queued(_ context.Context, e observe.QueueEvent) {
	r.add("queued %s rank=%d", e.Semaphore, e.Rank)
}

func (r *recorder) PermitRefreshed(_ context.Context, e observe.PermitEvent) {
	r.add("refreshed %s slot=%d %v notHeld=%v", e.Semaphore, e.Slot, e.TTL, errors.Is(e.Err, lease.ErrNotHeld))
}

func (r *recorder) PermitReleased(_ context.Context, e observe.PermitEvent) {
	r.add("released %s slot=%d notHeld=%v held=%v", e.Semaphore, e.Slot, errors.Is(e.Err, lease.ErrNotHeld), e.Held > 0)
}

func wantLines(t *testing.T, r *recorder, want ...string) {
	t.Helper()
	got := r.take()
	assert.Equal(t, fmt.Sprint(want), fmt.Sprint(got), "events:\n got %q\nwant %q", got, want)
}

// A Semaphore reports every Acquire (its outcome, slot and fence), the
// wait of a call that queues, and each permit's renewal and release.
func TestObserverEvents(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	r := &recorder{}
	q := watchQueued()
	s := newSem(t, srv.Client(nil), "obs", 1, semaphore.WithObserver(r), q.option())
	p := try(t, s, time.Minute)
	wantLines(t, r, "start obs 1m0s", "done obs obtained slot=0 fenced=true")
	assert.True(t, r.ctxOK, "AcquireDone did not get the ctx AcquireStart returned")
	_, err := s.TryAcquire(ctx, time.Minute)
	require.ErrorIs(t, err, lease.ErrNotObtained, "TryAcquire of a taken slot")
	wantLines(t, r, "start obs 1m0s", "done obs contended slot=-1 fenced=false")
	require.NoError(t, p.Refresh(ctx, 2*time.Minute))
	wantLines(t, r, "refreshed obs slot=0 2m0s notHeld=false")

	// A waiter, released into the slot.
	got := make(chan error, 1)
	go func() {
		w, err := s.Acquire(ctx, time.Minute)
		if err == nil {
			err = w.Release(ctx)
		}
		got <- err
	}()
	q.wait(t, 2) // queued: the first attempt and the one after subscribing
	require.NoError(t, p.Release(ctx))
	require.NoError(t, <-got)
	// The holder's release and the waiter's grant race to the recorder.
	lines := r.take()
	slices.Sort(lines)
	want := []string{"done obs obtained slot=0 fenced=true", "queued obs rank=0",
		"released obs slot=0 notHeld=false held=true", "released obs slot=0 notHeld=false held=true", "start obs 1m0s"}
	assert.Equal(t, fmt.Sprint(want), fmt.Sprint(lines), "events of a wait:\n got %q\nwant %q", lines, want)
	require.ErrorIs(t, p.Release(ctx), lease.ErrNotHeld, "second Release")
	wantLines(t, r, "released obs slot=0 notHeld=true held=true")
}

// A value that observes nothing of a Semaphore is refused.
func TestObserverInvalid(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{}) // New makes no call
	defer rdb.Close()
	for _, o := range []observe.Observer{nil, "not an observer", observe.NewLogger(nil)} {
		_, err := semaphore.New(rdb, "x", 1, semaphore.WithObserver(o))
		assert.ErrorIs(t, err, lease.ErrInvalidArgument, "WithObserver(%T), want ErrInvalidArgument", o)
	}
}
