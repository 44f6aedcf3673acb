package script

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// fast is a script of the hot path (obtain, release, refresh, TTL) sent
// without Script.Run: its command arguments are built once per call in one
// slice, with the digest and the source boxed once (Script), and an
// integer reply is read without boxing it. That saves about half the
// allocations of a call. It is sent as Script.Run sends it: EVALSHA once a
// server named the digest, EVAL on NOSCRIPT or before.
type fast struct {
	script *Script
}

func newFast(src string) *fast { return &fast{script: newScript(src)} }

// args returns a command slice for keys (strings, boxed) and n more
// arguments: the command and the script (set by send), len(keys), keys;
// the caller appends ARGV.
func (s *fast) args(keys []any, n int) []any {
	a := make([]any, 3, 3+len(keys)+n)
	a[2] = len(keys)
	return append(a, keys...)
}

// Box returns keys boxed for the fast scripts' calls.
func Box(keys ...string) []any {
	b := make([]any, len(keys))
	for i, k := range keys {
		b[i] = k
	}
	return b
}

// processor runs one command: go-redis' clients.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Deferred is a Scripter whose Process may return before the command has
// its reply, because its caller stopped waiting for it (a batched node
// call's): Late then reports true, and the command must not be read.
type Deferred interface {
	redis.Scripter
	processor
	Late() bool
}

// direct is where a call may go straight through Process: go-redis'
// plain and Cluster clients answer every command before Process returns,
// and a Deferred tells when it did not. Anything else (an AutoPipeliner,
// a Ring, a user's wrapper) goes through Script.Run.
func direct(rdb redis.Scripter) (processor, bool) {
	switch r := rdb.(type) {
	case *redis.Client:
		return r, true
	case *redis.ClusterClient:
		return r, true
	case Deferred:
		return r, true
	}
	return nil, false
}

// runInt sends a (built by s.args, ARGV appended) and reads an integer
// reply.
func (s *fast) runInt(ctx context.Context, rdb redis.Scripter, nkeys int, a []any) (int64, error) {
	p, ok := direct(rdb)
	if !ok {
		return s.script.Run(ctx, rdb, keysOf(a, nkeys), a[3+nkeys:]...).Int64()
	}
	return send(ctx, p, rdb, s.script, a, redis.NewIntCmd).Result()
}

// run is runInt for any reply.
func (s *fast) run(ctx context.Context, rdb redis.Scripter, nkeys int, a []any) (any, error) {
	p, ok := direct(rdb)
	if !ok {
		return s.script.Run(ctx, rdb, keysOf(a, nkeys), a[3+nkeys:]...).Result()
	}
	return send(ctx, p, rdb, s.script, a, redis.NewCmd).Result()
}

// send processes a as EVALSHA, and as EVAL on NOSCRIPT; as EVAL while
// no server has named the script's digest, learning it then (Script.learn).
// A command a Deferred left without its reply is not read: the caller gets
// a fresh one with Process' error.
func send[C redis.Cmder](ctx context.Context, p processor, rdb redis.Scripter, s *Script, a []any, newCmd func(ctx context.Context, args ...any) C) C {
	d := s.sha.Load()
	if d == nil {
		a[0], a[1] = "eval", s.box
	} else {
		a[0], a[1] = "evalsha", d.box
	}
	cmd := newCmd(ctx, a...)
	cmd.SetFirstKeyPos(3)
	if err := p.Process(ctx, cmd); late(p) {
		return lateCmd(ctx, newCmd, err)
	}
	switch err := cmd.Err(); {
	case d == nil:
		n, _ := a[2].(int)
		s.learn(ctx, rdb, keysOf(a, min(n, 1)), err)
	case err != nil && redis.HasErrorPrefix(err, "NOSCRIPT"):
		a[0], a[1] = "eval", s.box
		cmd = newCmd(ctx, a...)
		cmd.SetFirstKeyPos(3)
		if err := p.Process(ctx, cmd); late(p) {
			return lateCmd(ctx, newCmd, err)
		}
	}
	return cmd
}

// late reports whether p is a Deferred that left its last command
// without a reply.
func late(p processor) bool {
	d, ok := p.(Deferred)
	return ok && d.Late()
}

// lateCmd is a command in place of one left without a reply: err, and
// nothing else.
func lateCmd[C redis.Cmder](ctx context.Context, newCmd func(ctx context.Context, args ...any) C, err error) C {
	cmd := newCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// keysOf recovers the keys of a command slice for Script.Run.
func keysOf(a []any, nkeys int) []string {
	ks := make([]string, nkeys)
	for i := range ks {
		ks[i], _ = a[3+i].(string)
	}
	return ks
}
