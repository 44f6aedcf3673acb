package redislock_test

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redislock-go/redislock/internal/sim"
)

// A mutation breaks, on purpose, one behaviour an invariant check guards:
// the simulation must then find that check broken (TestSimMutations), or
// the check could not fail. Most rewrite one of the project's scripts as
// the nodes run it; "late" delays a grant on its way to the caller.
type simMutation struct {
	expect string                      // the check that must fire
	script func(string) (string, bool) // rewrites a script's source; false: not this script
	late   bool                        // the caller sees each grant one TTL late
}

// simMutations, by mode name ("mut-" + the name).
var simMutations = map[string]simMutation{
	// Release deletes the key without comparing the token: a stale
	// holder's release frees a newer holder's lock for a third client.
	"nocheck": {expect: sim.InvExclusion, script: func(src string) (string, bool) {
		if !strings.HasPrefix(src, "-- release:") {
			return "", false
		}
		return "redis.call('DEL', KEYS[1]) do return 1 end\n" + src, true
	}},
	// Obtain takes any proposed fence, also one below the key's last:
	// a client whose clock is behind proposes a lower one.
	"lowfence": {expect: sim.InvFenceOrder, script: func(src string) (string, bool) {
		return replaceOnce(src, "-- propose:", "if fence and not below(fence, p) then", "if false then")
	}},
	// Obtain sets the key without PX: it never expires.
	"nopx": {expect: sim.InvExpiry, script: func(src string) (string, bool) {
		return replaceObtain(src, "';', 'PX', ARGV[2])", "';')")
	}},
	// Obtain sets half the TTL asked for: the key expires while its
	// holder was told it is valid.
	"halfpx": {expect: sim.InvLossReported, script: func(src string) (string, bool) {
		return replaceObtain(src, "';', 'PX', ARGV[2])", "';', 'PX', math.floor(ARGV[2] / 2))")
	}},
	// A refresh's join takes the key whatever it holds: a slow holder's
	// refresh takes a node of the newer holder's majority, which is left
	// without one while its client believes it valid.
	"jointake": {expect: sim.InvLossReported, script: func(src string) (string, bool) {
		return replaceOnce(src, "-- join:", "if v and tok ~= '~' then", "if false then")
	}},
	// The grant reaches its caller one TTL after Obtain returned it, as
	// if Obtain returned grants after their validity (the library's own
	// check cannot be switched off from outside).
	"late": {expect: sim.InvValidReturn, late: true},
}

func init() {
	for name, m := range simMutations {
		simModes["mut-"+name] = simModeSpec{cfg: simConfig, expect: m.expect, mutate: name}
	}
}

// replaceOnce rewrites src, if src is the script whose header begins with
// head: each pair of olds (old, new) replaces its old once, and every old
// must be in it (a script changed under a mutation makes it fail to apply,
// and its check then not fire: TestSimMutations fails).
func replaceOnce(src, head string, olds ...string) (string, bool) {
	if !strings.Contains(src, head) {
		return "", false
	}
	for i := 0; i+1 < len(olds); i += 2 {
		if !strings.Contains(src, olds[i]) {
			return "", false
		}
		src = strings.Replace(src, olds[i], olds[i+1], 1)
	}
	return src, true
}

// replaceObtain is replaceOnce on both obtain scripts: obtain.lua, which
// mints the fence (single mode), and propose.lua (quorum mode).
func replaceObtain(src string, olds ...string) (string, bool) {
	if out, ok := replaceOnce(src, "-- obtain:", olds...); ok {
		return out, true
	}
	return replaceOnce(src, "-- propose:", olds...)
}

// TestSimMutations runs each mutation and asserts that its check fires
// within -sim.budget seeds.
func TestSimMutations(t *testing.T) {
	for name := range simMutations {
		t.Run(name, func(t *testing.T) { simParent(t, "mut-"+name, *simFirst, *simBudget) })
	}
}

// scriptRewriter makes the nodes run the mutated scripts: an EVAL of a
// script it rewrites runs the rewrite (which miniredis then knows by the
// rewrite's digest), and an EVALSHA of the original's digest is sent on
// as the rewrite's (NOSCRIPT until an EVAL ran it: the library then sends
// EVAL, as go-redis' Script.Run does).
type scriptRewriter struct {
	rewrite func(string) (string, bool)
	mu      sync.Mutex
	shas    map[string]string // original digest -> rewrite's
}

// install sets the rewriter as m's pre-hook (miniredis hands the hook the
// command's own argument slice: a change is what the command runs).
func (s *scriptRewriter) install(m *miniredis.Miniredis) {
	if c, err := m.Dial(); err == nil { // starts the server the hook is set on
		_ = c.Close()
	}
	m.Server().SetPreHook(func(_ *server.Peer, cmd string, args ...string) bool {
		if len(args) == 0 {
			return false
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		switch cmd {
		case "EVAL":
			if src, ok := s.rewrite(args[0]); ok {
				s.shas[digest(args[0])] = digest(src)
				args[0] = src
			}
		case "EVALSHA":
			if sha, ok := s.shas[args[0]]; ok {
				args[0] = sha
			}
		}
		return false
	})
}

func digest(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}
