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
// NewScript computes one), so the script is known by the one SCRIPT LOAD
// answers. Until a server has named it, a call sends EVAL (the source) and,
// once that EVAL reached the server, asks for the digest with SCRIPT LOAD;
// later calls send EVALSHA and fall back to EVAL on NOSCRIPT (SCRIPT FLUSH,
// a restart, a server that has not seen the script). The digest is the
// same on every server, so one learned from any serves for all.
type Script struct {
	src string
	box any                    // src, boxed once
	sha atomic.Pointer[digest] // nil until a server named it
	ask atomic.Int64           // unix ns before which SCRIPT LOAD is not asked (one in flight, or failed)
}

// digest is a script's SHA-1 as a server named it, and boxed once.
type digest struct {
	hex string
	box any
}

func newScript(src string) *Script { return &Script{src: src, box: src} }

// loadPause is how long a script whose SCRIPT LOAD failed (refused by an
// ACL without +script|load, a proxy that does not know it) is sent with
// EVAL before SCRIPT LOAD is asked again.
var loadPause = time.Minute

// loading is the ask value of a SCRIPT LOAD in flight: far in the future.
const loading = 1<<63 - 1

// Run runs the script on rdb with keys and args: EVALSHA when a server has
// named its digest (EVAL on NOSCRIPT), else EVAL.
func (s *Script) Run(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	d := s.sha.Load()
	if d == nil {
		cmd := rdb.Eval(ctx, s.src, keys, args...)
		s.learn(ctx, rdb, cmd.Err())
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

// learn asks rdb for the script's digest (SCRIPT LOAD) after an EVAL of it
// ended with err, unless that EVAL did not reach the server (err is
// neither nil nor an error reply), another call is asking, or an earlier
// ask failed less than loadPause ago. A Deferred is not asked: a SCRIPT
// LOAD it left without its reply would stand for the call's own command;
// its calls send EVAL until a call on the client itself has learned the
// digest.
func (s *Script) learn(ctx context.Context, rdb redis.Scripter, err error) {
	if err != nil && !isReply(err) || ctx.Err() != nil {
		return
	}
	if _, ok := rdb.(Deferred); ok {
		return
	}
	at := s.ask.Load()
	if time.Now().UnixNano() < at || !s.ask.CompareAndSwap(at, loading) {
		return
	}
	// A Cluster client asks every master: Val holds a digest if one
	// answered, also when another failed.
	if sha := rdb.ScriptLoad(ctx, s.src).Val(); isDigest(sha) {
		s.sha.Store(&digest{hex: sha, box: sha})
		s.ask.Store(0)
		return
	}
	s.ask.Store(time.Now().Add(loadPause).UnixNano())
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
