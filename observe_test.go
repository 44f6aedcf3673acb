package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/observe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is an Observer of every kind; it keeps the events and signals
// each kind on a channel, so that tests wait for events, not time.
type recorder struct {
	mu     sync.Mutex
	events []any
	got    map[string]chan struct{}
}

func newRecorder() *recorder { return &recorder{got: make(map[string]chan struct{})} }

type ctxKey struct{}

func (r *recorder) add(kind string, e any) {
	r.mu.Lock()
	r.events = append(r.events, e)
	ch := r.signal(kind)
	r.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (r *recorder) signal(kind string) chan struct{} {
	if r.got[kind] == nil {
		r.got[kind] = make(chan struct{}, 1)
	}
	return r.got[kind]
}

// wait waits for an event of kind (it fails the test after 10 s).
func (r *recorder) wait(t *testing.T, kind string) {
	t.Helper()
	r.mu.Lock()
	ch := r.signal(kind)
	r.mu.Unlock()
	testkit.Recv(t, ch, kind+" event")
}

// last returns the newest event of type E.
func last[E any](r *recorder) (e E, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		if v, is := r.events[i].(E); is {
			return v, true
		}
	}
	return e, false
}

func (r *recorder) ObtainStart(ctx context.Context, e observe.ObtainStartEvent) context.Context {
	r.add("obtainStart", e)
	return context.WithValue(ctx, ctxKey{}, "obtain:"+e.Key)
}
func (r *recorder) ObtainDone(ctx context.Context, e observe.ObtainDoneEvent) {
	if ctx.Value(ctxKey{}) != "obtain:"+e.Key {
		panic("ObtainDone without the context ObtainStart returned")
	}
	r.add("obtainDone", e)
}
func (r *recorder) WaitStart(_ context.Context, e observe.WaitEvent) { r.add("wait", e) }
func (r *recorder) RefreshStart(ctx context.Context, e observe.RefreshStartEvent) context.Context {
	r.add("refreshStart", e)
	return ctx
}
func (r *recorder) RefreshDone(_ context.Context, e observe.RefreshDoneEvent) {
	r.add("refreshDone", e)
}
func (r *recorder) ReleaseStart(ctx context.Context, e observe.ReleaseStartEvent) context.Context {
	r.add("releaseStart", e)
	return ctx
}
func (r *recorder) ReleaseDone(_ context.Context, e observe.ReleaseDoneEvent) {
	r.add("releaseDone", e)
}
func (r *recorder) LockLost(_ context.Context, e observe.LossEvent)         { r.add("lost", e) }
func (r *recorder) NodeFailed(_ context.Context, e observe.NodeEvent)       { r.add("node", e) }
func (r *recorder) Resubscribed(e observe.SubscriptionEvent)                { r.add("resubscribed", e) }
func (r *recorder) CleanupFailed(_ context.Context, e observe.CleanupEvent) { r.add("cleanup", e) }
func (r *recorder) StaleFence(_ context.Context, e observe.StaleFenceEvent) { r.add("stale", e) }

// Each observer event fires for the action it names.
func TestObserverEvents(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	// The context ObtainStart returns reaches the Redis calls: a hook sees it.
	var sawSpan sync.Once
	spanSeen := make(chan struct{})
	rdb.AddHook(ctxHook{func(ctx context.Context) {
		if v, _ := ctx.Value(ctxKey{}).(string); strings.HasPrefix(v, "obtain:") {
			sawSpan.Do(func() { close(spanSeen) })
		}
	}})
	rec := newRecorder()
	c := newClient(t, rdb, redislock.WithObserver(rec))
	ctx := testkit.Context(t)

	l, err := c.Obtain(ctx, "obs", 10*time.Second)
	require.NoError(t, err)
	select {
	case <-spanSeen:
	default:
		require.Fail(t, "the Redis call did not get ObtainStart's context")
	}
	e, _ := last[observe.ObtainDoneEvent](rec)
	require.Equal(t, observe.Obtained, e.Outcome(), "ObtainDone = %+v, want obtained with fence %d", e, l.Fence())
	require.Equal(t, l.Fence(), e.Fence, "ObtainDone = %+v, want obtained with fence %d", e, l.Fence())
	require.Equal(t, 1, e.Attempts, "ObtainDone = %+v, want obtained with fence %d", e, l.Fence())
	require.Equal(t, "obs", e.Key, "ObtainDone = %+v, want obtained with fence %d", e, l.Fence())

	// Contention, once without waiting and once waiting.
	_, err = c.Obtain(ctx, "obs", time.Second)
	require.ErrorIs(t, err, redislock.ErrNotObtained)
	e, _ = last[observe.ObtainDoneEvent](rec)
	require.Equal(t, observe.Contended, e.Outcome(), "ObtainDone = %+v, want contended", e)
	require.Equal(t, int64(0), e.Fence, "ObtainDone = %+v, want contended", e)
	type obtained struct {
		l   *redislock.Lock
		err error
	}
	handed := make(chan obtained, 1)
	go func() {
		w, err := c.Obtain(ctx, "obs", 10*time.Second, redislock.WithRetry(redislock.LinearBackoff(time.Second)))
		handed <- obtained{w, err}
	}()
	rec.wait(t, "wait")
	if e, _ := last[observe.WaitEvent](rec); e.Key != "obs" || e.Waiters < 1 {
		require.Fail(t, fmt.Sprintf("WaitStart = %+v, want a waiter on obs", e))
	}

	require.NoError(t, l.Refresh(ctx, 10*time.Second))
	if e, _ := last[observe.RefreshDoneEvent](rec); e.Err != nil || e.Renewal || e.Fence != l.Fence() {
		require.Fail(t, fmt.Sprintf("RefreshDone = %+v", e))
	}
	require.NoError(t, l.Release(ctx))
	if e, _ := last[observe.ReleaseDoneEvent](rec); e.Err != nil || e.Held <= 0 || e.Fence != l.Fence() {
		require.Fail(t, fmt.Sprintf("ReleaseDone = %+v", e))
	}
	// The waiter releases only now, so that its ReleaseDone is not the
	// last one above.
	w := testkit.Recv(t, handed, "the waiter's grant")
	require.NoError(t, w.err)
	require.NoError(t, w.l.Release(ctx))

	// A grant found gone: on refresh, on release, and by Run's renewal.
	gone, err := c.Obtain(ctx, "gone", 10*time.Second)
	require.NoError(t, err)
	rdb.Del(ctx, redislock.LockKey("gone"))
	require.ErrorIs(t, gone.Refresh(ctx, time.Second), redislock.ErrNotHeld)
	if e, _ := last[observe.RefreshDoneEvent](rec); !errors.Is(e.Err, redislock.ErrNotHeld) {
		require.Fail(t, fmt.Sprintf("RefreshDone = %+v, want ErrNotHeld", e))
	}
	require.ErrorIs(t, gone.Release(ctx), redislock.ErrNotHeld)
	if e, _ := last[observe.ReleaseDoneEvent](rec); !errors.Is(e.Err, redislock.ErrNotHeld) {
		require.Fail(t, fmt.Sprintf("ReleaseDone = %+v, want ErrNotHeld", e))
	}
	// The lease outlasts any renewal's round trip on a loaded machine: the
	// loss is the renewal's finding the key gone (50 ms after the Del),
	// not the lease's end racing a slow renewal.
	err = c.Run(ctx, "run", time.Minute, func(ctx context.Context, l *redislock.Lock) error {
		rdb.Del(ctx, redislock.LockKey("run"))
		<-ctx.Done()
		return nil
	}, redislock.WithRefreshInterval(50*time.Millisecond))
	require.ErrorIs(t, err, redislock.ErrLockLost)
	if e, ok := last[observe.LossEvent](rec); !ok || e.Key != "run" || !errors.Is(e.Cause, redislock.ErrNotHeld) {
		require.Fail(t, fmt.Sprintf("LossEvent = %+v, %v", e, ok))
	}
	if e, _ := last[observe.RefreshDoneEvent](rec); !e.Renewal {
		require.Fail(t, fmt.Sprintf("Run's renewal = %+v, want Renewal", e))
	}

	// A stale owner's write.
	st := c.Store()
	require.NoError(t, st.Put(ctx, "rec", []byte("new"), 9, 0))
	require.ErrorIs(t, st.Put(ctx, "rec", []byte("old"), 3, 0), redislock.ErrStaleFence)
	if e, ok := last[observe.StaleFenceEvent](rec); !ok || e.Fence != 3 || e.Newest != 9 {
		require.Fail(t, fmt.Sprintf("StaleFenceEvent = %+v", e))
	}

	// The subscription connection dies while a waiter listens on it: it
	// is replaced, and said so.
	busy, err := c.Obtain(ctx, "busy", 10*time.Second)
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() {
		w, err := c.Obtain(ctx, "busy", 10*time.Second, redislock.WithRetry(redislock.LinearBackoff(time.Minute)))
		if err == nil {
			err = w.Release(ctx)
		}
		waited <- err
	}()
	require.Eventually(t, func() bool {
		n, ready := redislock.LocalWaiters(c, "busy")
		return n == 1 && ready
	}, 10*time.Second, 5*time.Millisecond, "the waiter subscribed")
	_, err = srv.Do("CLIENT", "KILL", "TYPE", "pubsub")
	require.NoError(t, err)
	rec.wait(t, "resubscribed")
	require.NoError(t, busy.Release(ctx))
	require.NoError(t, <-waited)

	// A node that fails: a call on a stopped server.
	srv.Kill()
	_, err = c.Obtain(ctx, "down", time.Second)
	require.Error(t, err, "granted on a dead server")
	if e, ok := last[observe.NodeEvent](rec); !ok || e.Op != "obtain" || e.Node != 0 {
		require.Fail(t, fmt.Sprintf("NodeEvent = %+v, %v", e, ok))
	}
	// Its clean-up (the obtain's outcome was unknown) failed too.
	rec.wait(t, "cleanup")
	if e, _ := last[observe.CleanupEvent](rec); e.Key != "down" || e.Err == nil {
		require.Fail(t, fmt.Sprintf("CleanupEvent = %+v", e))
	}
}

// ctxHook calls see with the context of every command.
type ctxHook struct{ see func(context.Context) }

func (h ctxHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h ctxHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.see(ctx)
		return next(ctx, cmd)
	}
}
func (h ctxHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// WithLogger logs a loss at Warn with the key and fence, never the token;
// grants and releases at Debug.
func TestLoggerReportsLoss(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(nil)
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newClient(t, rdb, redislock.WithLogger(logger))
	ctx := testkit.Context(t)
	var token string
	// A lease no renewal's round trip outlasts: the loss is the renewal's
	// finding the key gone, not the lease's end.
	err := c.Run(ctx, "logged", time.Minute, func(ctx context.Context, l *redislock.Lock) error {
		token = l.Token()
		rdb.Del(ctx, redislock.LockKey("logged"))
		<-ctx.Done()
		return nil
	}, redislock.WithRefreshInterval(50*time.Millisecond))
	require.ErrorIs(t, err, redislock.ErrLockLost)
	out := buf.String()
	for _, want := range []string{
		`level=DEBUG msg="redislock: obtained" key=logged fence=`,
		`level=WARN msg="redislock: refresh found the lock gone" key=logged`,
		`level=WARN msg="redislock: lock lost" key=logged fence=`,
	} {
		assert.Contains(t, out, want, "the log")
	}
	assert.NotContains(t, out, token, "the log holds the token")
}

// A value that observes nothing is an invalid option, reported by calls.
func TestObserverInvalid(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	c := redislock.New(rdb, redislock.WithObserver(42))
	defer c.Close()
	_, err := c.Obtain(context.Background(), "k", time.Second)
	require.ErrorIs(t, err, redislock.ErrInvalidArgument, "Obtain with WithObserver(42), want ErrInvalidArgument")
	_, err = redislock.NewQuorum([]redis.UniversalClient{rdb}, redislock.WithLogger(nil))
	require.ErrorIs(t, err, redislock.ErrInvalidArgument, "NewQuorum with WithLogger(nil)")
}
