package script

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Script is a Lua script run by the digest a server names for it. No digest
// is computed here: SHA-1 is refused under GODEBUG=fips140=only (go-redis'
// NewScript computes one). Until a server has named it, a call sends EVAL
// (the source) and, once that EVAL reached the server, asks that server
// for the digest (Script.learn); later calls send EVALSHA and fall back to
// EVAL on NOSCRIPT (SCRIPT FLUSH, a restart, a server that has not seen the
// script). The digest is the same on every server, so one learned from any
// serves for all.
type Script struct {
	src string
	box any                    // src, boxed once
	sha atomic.Pointer[digest] // nil until a server named it
	ask atomic.Int64           // unix ns before which the digest is not asked for (an ask in flight, or failed)
}

// digest is a script's SHA-1 as a server named it, and boxed once.
type digest struct {
	hex string
	box any
}

func newScript(src string) *Script { return &Script{src: src, box: src} }

// digestOf is the script that names the digest of its ARGV[1] as SCRIPT
// LOAD would answer it (the SHA-1 of the source, in hex). Unlike SCRIPT
// LOAD, which has no key (go-redis' Cluster and Ring clients send it to
// every master and wait for all) and needs a permission of its own, it is
// sent with the call's first key, to the node that just ran the call, with
// the permissions the call has.
const digestOf = "return redis.sha1hex(ARGV[1])"

// askPause is how long a script whose digest could not be had (an error,
// a server without redis.sha1hex) is sent with EVAL before it is asked
// for again.
var askPause = time.Minute

// asking is the ask value of an ask in flight: far in the future.
const asking = 1<<63 - 1

// Run runs the script on rdb with keys and args: EVALSHA when a server has
// named its digest (EVAL on NOSCRIPT), else EVAL.
func (s *Script) Run(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	d := s.sha.Load()
	if d == nil {
		cmd := rdb.Eval(ctx, s.src, keys, args...)
		s.learn(ctx, rdb, keys, cmd.Err())
		return cmd
	}
	cmd := rdb.EvalSha(ctx, d.hex, keys, args...)
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") { // (HasErrorPrefix allocates)
		return rdb.Eval(ctx, s.src, keys, args...)
	}
	return cmd
}

// Digest returns the script's digest as a server named it, "" before one
// did.
func (s *Script) Digest() string {
	if d := s.sha.Load(); d != nil {
		return d.hex
	}
	return ""
}

// learn asks rdb for the script's digest (digestOf, with the first of
// keys) after an EVAL of it with keys ended with err, unless that EVAL did
// not reach the server (err is neither nil nor an error reply), another
// call is asking, or an ask failed less than askPause ago. A Deferred is
// not asked: a command it left without its reply would stand for the
// call's own; its calls send EVAL until a call on the client itself has
// learned the digest.
func (s *Script) learn(ctx context.Context, rdb redis.Scripter, keys []string, err error) {
	if err != nil && !isReply(err) || ctx.Err() != nil {
		return
	}
	if _, ok := rdb.(Deferred); ok {
		return
	}
	at := s.ask.Load()
	if time.Now().UnixNano() < at || !s.ask.CompareAndSwap(at, asking) {
		return
	}
	if sha, err := rdb.Eval(ctx, digestOf, keys[:min(len(keys), 1)], s.box).Text(); err == nil && isDigest(sha) {
		s.sha.Store(&digest{hex: sha, box: sha})
		s.ask.Store(0)
		return
	}
	s.ask.Store(time.Now().Add(askPause).UnixNano())
}

// isDigest reports whether sha is a SHA-1 in hex, as SCRIPT LOAD answers.
func isDigest(sha string) bool {
	if len(sha) != 40 {
		return false
	}
	for _, c := range []byte(sha) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// isReply reports whether err is an error reply of the server: the
// command reached it.
func isReply(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply)
}
