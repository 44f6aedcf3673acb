package redislock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
	"github.com/redislock-go/redislock/observe"
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
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s event", kind)
	}
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
	ctx := ctxT(t, 30*time.Second)

	l, err := c.Obtain(ctx, "obs", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-spanSeen:
	default:
		t.Fatal("the Redis call did not get ObtainStart's context")
	}
	if e, _ := last[observe.ObtainDoneEvent](rec); e.Outcome() != observe.Obtained || e.Fence != l.Fence() || e.Attempts != 1 || e.Key != "obs" {
		t.Fatalf("ObtainDone = %+v, want obtained with fence %d", e, l.Fence())
	}

	// Contention, once without waiting and once waiting.
	if _, err := c.Obtain(ctx, "obs", time.Second); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatal(err)
	}
	if e, _ := last[observe.ObtainDoneEvent](rec); e.Outcome() != observe.Contended || e.Fence != 0 {
		t.Fatalf("ObtainDone = %+v, want contended", e)
	}
	waited := make(chan error, 1)
	go func() {
		w, err := c.Obtain(ctx, "obs", 10*time.Second, redislock.WithRetry(redislock.LinearBackoff(time.Second)))
		if err == nil {
			err = w.Release(ctx)
		}
		waited <- err
	}()
	rec.wait(t, "wait")
	if e, _ := last[observe.WaitEvent](rec); e.Key != "obs" || e.Waiters < 1 {
		t.Fatalf("WaitStart = %+v, want a waiter on obs", e)
	}

	if err := l.Refresh(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if e, _ := last[observe.RefreshDoneEvent](rec); e.Err != nil || e.Renewal || e.Fence != l.Fence() {
		t.Fatalf("RefreshDone = %+v", e)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if e, _ := last[observe.ReleaseDoneEvent](rec); e.Err != nil || e.Held <= 0 || e.Fence != l.Fence() {
		t.Fatalf("ReleaseDone = %+v", e)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}

	// A grant found gone: on refresh, on release, and by Run's renewal.
	gone, err := c.Obtain(ctx, "gone", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, redislock.LockKey("gone"))
	if err := gone.Refresh(ctx, time.Second); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatal(err)
	}
	if e, _ := last[observe.RefreshDoneEvent](rec); !errors.Is(e.Err, redislock.ErrNotHeld) {
		t.Fatalf("RefreshDone = %+v, want ErrNotHeld", e)
	}
	if err := gone.Release(ctx); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatal(err)
	}
	if e, _ := last[observe.ReleaseDoneEvent](rec); !errors.Is(e.Err, redislock.ErrNotHeld) {
		t.Fatalf("ReleaseDone = %+v, want ErrNotHeld", e)
	}
	err = c.Run(ctx, "run", time.Second, func(ctx context.Context, l *redislock.Lock) error {
		rdb.Del(ctx, redislock.LockKey("run"))
		<-ctx.Done()
		return nil
	}, redislock.WithRefreshInterval(50*time.Millisecond))
	if !errors.Is(err, redislock.ErrLockLost) {
		t.Fatal(err)
	}
	if e, ok := last[observe.LossEvent](rec); !ok || e.Key != "run" || !errors.Is(e.Cause, redislock.ErrNotHeld) {
		t.Fatalf("LossEvent = %+v, %v", e, ok)
	}
	if e, _ := last[observe.RefreshDoneEvent](rec); !e.Renewal {
		t.Fatalf("Run's renewal = %+v, want Renewal", e)
	}

	// A stale owner's write.
	st := c.Store()
	if err := st.Put(ctx, "rec", []byte("new"), 9, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "rec", []byte("old"), 3, 0); !errors.Is(err, redislock.ErrStaleFence) {
		t.Fatal(err)
	}
	if e, ok := last[observe.StaleFenceEvent](rec); !ok || e.Fence != 3 || e.Newest != 9 {
		t.Fatalf("StaleFenceEvent = %+v", e)
	}

	// The subscription connection dies while a waiter listens on it: it
	// is replaced, and said so.
	busy, err := c.Obtain(ctx, "busy", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		w, err := c.Obtain(ctx, "busy", 10*time.Second, redislock.WithRetry(redislock.LinearBackoff(time.Minute)))
		if err == nil {
			err = w.Release(ctx)
		}
		waited <- err
	}()
	eventually(t, 10*time.Second, "the waiter subscribed", func() bool {
		n, ready := redislock.LocalWaiters(c, "busy")
		return n == 1 && ready
	})
	if _, err := srv.Do("CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, "resubscribed")
	if err := busy.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}

	// A node that fails: a call on a stopped server.
	srv.Kill()
	if _, err := c.Obtain(ctx, "down", time.Second); err == nil {
		t.Fatal("granted on a dead server")
	}
	if e, ok := last[observe.NodeEvent](rec); !ok || e.Op != "obtain" || e.Node != 0 {
		t.Fatalf("NodeEvent = %+v, %v", e, ok)
	}
	// Its clean-up (the obtain's outcome was unknown) failed too.
	rec.wait(t, "cleanup")
	if e, _ := last[observe.CleanupEvent](rec); e.Key != "down" || e.Err == nil {
		t.Fatalf("CleanupEvent = %+v", e)
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
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newClient(t, rdb, redislock.WithLogger(logger))
	ctx := ctxT(t, 10*time.Second)
	var token string
	err := c.Run(ctx, "logged", time.Second, func(ctx context.Context, l *redislock.Lock) error {
		token = l.Token()
		rdb.Del(ctx, redislock.LockKey("logged"))
		<-ctx.Done()
		return nil
	}, redislock.WithRefreshInterval(50*time.Millisecond))
	if !errors.Is(err, redislock.ErrLockLost) {
		t.Fatal(err)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{
		`level=DEBUG msg="redislock: obtained" key=logged fence=`,
		`level=WARN msg="redislock: refresh found the lock gone" key=logged`,
		`level=WARN msg="redislock: lock lost" key=logged fence=`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, token) {
		t.Errorf("the log holds the token:\n%s", out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// A value that observes nothing is an invalid option, reported by calls.
func TestObserverInvalid(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	c := redislock.New(rdb, redislock.WithObserver(42))
	defer c.Close()
	if _, err := c.Obtain(context.Background(), "k", time.Second); !errors.Is(err, redislock.ErrInvalidArgument) {
		t.Fatalf("Obtain with WithObserver(42) = %v, want ErrInvalidArgument", err)
	}
	if _, err := redislock.NewQuorum([]redis.UniversalClient{rdb}, redislock.WithLogger(nil)); !errors.Is(err, redislock.ErrInvalidArgument) {
		t.Fatalf("NewQuorum with WithLogger(nil) = %v", err)
	}
}
