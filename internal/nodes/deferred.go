package nodes

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A batched Op waits for its reply on the caller's goroutine. Its
// commands go to the node's deferred AutoPipeliner (go-redis'
// AsyncAutoPipeline: Submit returns at once, the reply comes with its
// batch), and the caller waits for each one only until its ctx ends or
// the call's timeout passes, as a guarded call's caller does, but without
// handing the call to a worker and being woken by it. When the caller
// stops waiting, the call is abandoned as a guarded one is: it counts
// among the node's abandoned calls (MaxAbandoned) until a worker has seen
// its command return and settled it. A command the Op would send after
// that is not sent (the caller has gone).

// deferredCall is one batched Op on the caller's goroutine, reused: the
// redis.Scripter its Run is given, and, once abandoned, the task that
// settles it.
type deferredCall struct {
	ap    *redis.AutoPipeliner // the node's deferred face
	wait  waiter               // the caller's bound: its ctx and the call's timeout
	reuse bool                 // wait may be used again (disarm)

	late    redis.AutoFuture // the command the caller stopped waiting for
	stopped bool             // the caller stopped waiting (late is set)

	ctx context.Context // the caller's, for the settle
	op  Op
	n   *Node
}

var deferreds = sync.Pool{New: func() any { return new(deferredCall) }}

func (d *deferredCall) put() {
	if !d.reuse {
		return // a callback of its waiter may still run
	}
	d.ap, d.late, d.stopped, d.ctx, d.op, d.n = nil, redis.AutoFuture{}, false, nil, nil, nil
	deferreds.Put(d)
}

// deferredFace returns the node's deferred AutoPipeliner (set up on first
// use; cached by go-redis and closed with the go-redis client), or nil
// where batched calls are guarded instead: a client of another type than
// *redis.Client, or one go-redis refused.
func (n *Node) deferredFace() *redis.AutoPipeliner {
	n.asyncOnce.Do(func() {
		if rdb, ok := n.RDB.(*redis.Client); ok {
			if ap, err := rdb.AsyncAutoPipeline(); err == nil {
				n.async = ap
			}
		}
	})
	return n.async
}

// deferred runs op on ap on the caller's goroutine, waiting for its
// replies until ctx ends or timeout passes (0: ctx alone bounds it). A
// call the caller stopped waiting for returns an error matching
// ErrAbandoned and its cause; a worker settles it once its command has
// returned. n.inflight counts the call until then.
func (n *Node) deferred(ctx context.Context, timeout time.Duration, ap *redis.AutoPipeliner, op Op) error {
	d := deferreds.Get().(*deferredCall)
	d.ap = ap
	d.wait.arm(ctx, timeout)
	err := op.Run(ctx, d)
	d.reuse = d.wait.disarm()
	if !d.stopped {
		d.put()
		n.inflight.Add(-1)
		n.noteReached(err)
		return err
	}
	cause := ctx.Err()
	if cause == nil {
		cause = context.DeadlineExceeded
	}
	err = &callError{cause: cause, kind: ErrAbandoned}
	n.noteReached(err) // a timeout: the node did not answer in time
	d.ctx, d.op, d.n = ctx, op, n
	n.Guarded.abandon()
	if !n.workers.tryRun(d) {
		go d.run()
	}
	return err
}

// run settles an abandoned call once its command has returned (a task of
// the node's workers).
func (d *deferredCall) run() {
	err := d.late.Wait()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The script did not run (SCRIPT FLUSH, a restart): the Op goes
		// on as it would have, here, loading it with EVAL, before it is
		// settled (a late Release then releases).
		err = d.op.Run(context.WithoutCancel(d.ctx), d.n.RDB)
	}
	n := d.n
	n.inflight.Add(-1)
	n.noteReached(err)
	d.op.OnLate(Bounded(context.WithValue(context.WithoutCancel(d.ctx), settling{}, true)), err)
	n.Guarded.settled()
	d.put()
}

// Process submits cmd and waits for its reply within the caller's bound.
// When the caller stops waiting first, it returns an error matching
// ErrAbandoned and Late reports true: cmd has no reply yet and must not
// be read. Once late, nothing more is sent.
func (d *deferredCall) Process(ctx context.Context, cmd redis.Cmder) error {
	if d.stopped {
		return ErrAbandoned
	}
	f := d.ap.Submit(ctx, cmd)
	err := f.WaitContext(&d.wait)
	if err != nil && d.wait.Err() != nil {
		// The wait ended, or the reply came as it did: either way the
		// caller goes, and the settle reads the reply.
		d.late, d.stopped = f, true
		return ErrAbandoned
	}
	return err
}

// Late reports whether the caller stopped waiting for a command.
func (d *deferredCall) Late() bool { return d.stopped }

// answered returns cmd once Process has returned err for it: cmd itself,
// or when late a fresh command with err, for cmd must not be read.
func answered[C redis.Cmder](d *deferredCall, ctx context.Context, cmd C, err error, fresh func(ctx context.Context, args ...any) C) C {
	if !d.stopped {
		return cmd
	}
	c := fresh(ctx)
	c.SetErr(err)
	return c
}

// The methods of redis.Scripter, for Ops that run scripts through
// Script.Run (go-redis' eval: EVAL or EVALSHA, numkeys, keys, args).

func (d *deferredCall) eval(ctx context.Context, name, payload string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 3+len(keys), 3+len(keys)+len(args))
	a[0], a[1], a[2] = name, payload, len(keys)
	for i, k := range keys {
		a[3+i] = k
	}
	cmd := redis.NewCmd(ctx, append(a, args...)...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return answered(d, ctx, cmd, d.Process(ctx, cmd), redis.NewCmd)
}

func (d *deferredCall) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return d.eval(ctx, "eval", script, keys, args)
}

func (d *deferredCall) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return d.eval(ctx, "evalsha", sha1, keys, args)
}

func (d *deferredCall) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return d.eval(ctx, "eval_ro", script, keys, args)
}

func (d *deferredCall) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return d.eval(ctx, "evalsha_ro", sha1, keys, args)
}

func (d *deferredCall) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	a := make([]any, 2, 2+len(hashes))
	a[0], a[1] = "script", "exists"
	for _, h := range hashes {
		a = append(a, h)
	}
	cmd := redis.NewBoolSliceCmd(ctx, a...)
	return answered(d, ctx, cmd, d.Process(ctx, cmd), redis.NewBoolSliceCmd)
}

func (d *deferredCall) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	cmd := redis.NewStringCmd(ctx, "script", "load", script)
	return answered(d, ctx, cmd, d.Process(ctx, cmd), redis.NewStringCmd)
}
