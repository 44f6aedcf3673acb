package script

import (
	"strconv"
	"strings"
)

// Value is a lock key's value as the scripts write it (scripts/record.lua):
// a grant, or a released record (Released; no Token, no Holder).
type Value struct {
	Token    string   // the grant's token
	Fence    int64    // the grant's fence, or the last fence of a released record
	Releases []string // the latest releases on the key, newest first, each named by its token's first 12 characters
	Holder   string   // the grant's holder identity, "" for none
	Marked   bool     // an attempt found the grant held: someone waits
	Released bool     // a released record: the lock is free
}

// ParseValue decodes a lock key's value v, as scripts/record.lua does;
// ok is false for a value the scripts do not write (someone else's).
// A grant is token ":" fence ":" rel ":" holder ";" with "*" appended
// once marked; a released record "~:" fence ":" rel.
func ParseValue(v string) (val Value, ok bool) {
	token, rest, ok1 := strings.Cut(v, ":")
	fence, rest, ok2 := strings.Cut(rest, ":")
	f, okf := parseFence(fence)
	if !ok1 || !ok2 || !okf || token == "" {
		return Value{}, false
	}
	rel, holder, grant := strings.Cut(rest, ":")
	val = Value{Fence: f}
	if rel != "" {
		val.Releases = strings.Fields(rel)
	}
	if token == releasedToken {
		val.Released = true
		return val, !grant
	}
	holder, val.Marked = strings.CutSuffix(holder, "*")
	holder, ok3 := strings.CutSuffix(holder, ";")
	if !grant || !ok3 {
		return Value{}, false
	}
	val.Token, val.Holder = token, holder
	return val, true
}

// releasedToken stands in a released record for the token of a grant.
const releasedToken = "~"

// parseFence reads a fence as the scripts write it: a decimal integer in
// (0, 2^63) without sign or leading zeros.
func parseFence(s string) (int64, bool) {
	if s == "" || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	f, err := strconv.ParseInt(s, 10, 64)
	return f, err == nil
}
