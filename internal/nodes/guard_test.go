package nodes_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock/internal/nodes"
)

// Guarded calls, on a node whose go-redis client does not apply context
// deadlines (no ContextTimeoutEnabled): the caller stops waiting when its
// ctx ends or the call's timeout passes, and the call goes on. The calls
// here block until the test lets them return, so that a timeout must pass
// first, however loaded the machine.

// blocked is a call that returns err once released.
type blocked struct {
	started chan struct{}
	release chan struct{}
	err     error
}

func newBlocked(err error) *blocked {
	return &blocked{started: make(chan struct{}, 1), release: make(chan struct{}), err: err}
}

func (b *blocked) call(context.Context, redis.Scripter) error {
	b.started <- struct{}{}
	<-b.release
	return b.err
}

// settled records a settle's ctx and error.
type settled struct {
	ctx context.Context
	err error
}

func TestCallNotSentOnEndedContext(t *testing.T) {
	t.Parallel()
	n := newNodes(t, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := n.Call(ctx, time.Minute, false, func(context.Context, redis.Scripter) error {
		t.Error("a call on an ended ctx was sent")
		return nil
	}, nil)
	if !nodes.NotSent(err) || !errors.Is(err, context.Canceled) || nodes.IsLate(err) {
		t.Fatalf("Call on an ended ctx: %v, want not sent, context.Canceled", err)
	}
}

// The caller stops waiting at the call's timeout (or when its ctx ends):
// an error matching ErrAbandoned and the cause. When the call returns, its
// settle runs with its error, on a ctx that has not ended, and the node's
// abandoned calls are counted down.
func TestCallAbandonedThenSettled(t *testing.T) {
	t.Parallel()
	n := newNodes(t, 1)[0]
	if n.Deadlines {
		t.Fatal("a client without ContextTimeoutEnabled said to apply deadlines")
	}
	for _, c := range []struct {
		name    string
		timeout time.Duration
		cancel  bool
		cause   error
	}{
		{"timeout", 10 * time.Millisecond, false, context.DeadlineExceeded},
		{"ctx ends", time.Hour, true, context.Canceled},
	} {
		b := newBlocked(io.EOF)
		ctx, cancel := context.WithCancel(context.Background())
		settles := make(chan settled, 1)
		go func() {
			<-b.started
			if c.cancel {
				cancel()
			}
		}()
		err := n.Call(ctx, c.timeout, false, b.call, func(ctx context.Context, err error) { settles <- settled{ctx, err} })
		cancel()
		if !nodes.IsLate(err) || !errors.Is(err, c.cause) || nodes.NotSent(err) {
			t.Fatalf("%s: %v, want abandoned with %v", c.name, err, c.cause)
		}
		if c.cause == context.DeadlineExceeded && !n.Down() {
			t.Fatalf("%s: a node that did not answer in time is not Down", c.name)
		}
		if n.Guarded.Wait(time.Now()) {
			t.Fatalf("%s: Wait reported no abandoned call while one runs", c.name)
		}
		close(b.release)
		s := <-settles
		if s.err != io.EOF || s.ctx.Err() != nil {
			t.Fatalf("%s: settled with %v on a ctx ended %v; want io.EOF on a live ctx", c.name, s.err, s.ctx.Err())
		}
		if !n.Guarded.Wait(time.Now().Add(time.Minute)) {
			t.Fatalf("%s: the settled call is still counted", c.name)
		}
	}
}

// A guarded call that returns in time returns its own error; nothing is
// settled.
func TestCallInTime(t *testing.T) {
	t.Parallel()
	n := newNodes(t, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	want := redis.Nil
	err := n.Call(ctx, time.Hour, false, func(context.Context, redis.Scripter) error { return want }, func(context.Context, error) {
		t.Error("a call that returned in time was settled")
	})
	if err != want {
		t.Fatalf("Call: %v, want %v", err, want)
	}
}

// With MaxAbandoned abandoned calls, a further guarded call waits for one
// of them to be settled, within its own bounds; one that could not go out
// is not sent.
func TestCallWaitsForAbandoned(t *testing.T) {
	t.Parallel()
	n := newNodes(t, 1)[0]
	ctx := nodes.Bounded(context.Background())
	var held []*blocked
	for range nodes.MaxAbandoned {
		b := newBlocked(nil)
		held = append(held, b)
		if err := n.Call(ctx, time.Millisecond, false, b.call, nil); !nodes.IsLate(err) {
			t.Fatalf("a blocked call was not abandoned: %v", err)
		}
	}
	defer func() {
		for _, b := range held[1:] {
			close(b.release)
		}
	}()
	err := n.Call(ctx, time.Millisecond, false, func(context.Context, redis.Scripter) error {
		t.Error("a call sent past MaxAbandoned abandoned calls")
		return nil
	}, nil)
	if !nodes.NotSent(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call past MaxAbandoned: %v, want not sent, deadline exceeded", err)
	}

	sent := make(chan error, 1)
	go func() {
		sent <- n.Call(ctx, time.Hour, false, func(context.Context, redis.Scripter) error { return nil }, nil)
	}()
	close(held[0].release) // one abandoned call returns: room for the waiting one
	if err := <-sent; err != nil {
		t.Fatalf("the waiting call, once there was room: %v", err)
	}
}

// Down follows the last call that ended: a network error or a timeout
// marks the node down, a reply (an error reply too) marks it up, a call
// its caller cancelled tells nothing.
func TestDown(t *testing.T) {
	t.Parallel()
	n := newNodes(t, 1)[0]
	call := func(err error) {
		t.Helper()
		_ = n.Call(context.Background(), time.Minute, false, func(context.Context, redis.Scripter) error { return err }, nil)
	}
	for _, step := range []struct {
		err  error
		down bool
	}{
		{io.EOF, true},
		{context.Canceled, true},
		{nil, false},
		{context.DeadlineExceeded, true},
		{redis.Nil, false}, // a reply
	} {
		call(step.err)
		if n.Down() != step.down {
			t.Fatalf("after a call that ended with %v: Down %v, want %v", step.err, n.Down(), step.down)
		}
	}
}

// Once bounds a call on a client of the caller's as Call does: not sent
// on an ended ctx, abandoned when the ctx ends first where the client does
// not apply deadlines.
func TestOnce(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := nodes.Once(ctx, rdb, func(context.Context) error { return nil }); !nodes.NotSent(err) {
		t.Fatalf("Once on an ended ctx: %v, want not sent", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	b := newBlocked(nil)
	defer close(b.release)
	go func() { <-b.started; cancel() }()
	err := nodes.Once(ctx, rdb, func(ctx context.Context) error { return b.call(ctx, nil) })
	if !nodes.IsLate(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Once whose ctx ended first: %v, want abandoned, context.Canceled", err)
	}
	if err := nodes.Once(context.Background(), rdb, func(context.Context) error { return io.EOF }); err != io.EOF {
		t.Fatalf("Once on a ctx that cannot end: %v, want the call's error", err)
	}
}
