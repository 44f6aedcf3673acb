package keys

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// suffixes are the kinds of name of a lock and of a semaphore, after the
// tag: the lock key, the wake channel, fair mode's queue and deadlines,
// the fenced record; the semaphore's state, holders, queue, queue
// deadlines, fence counter and wake channel.
var suffixes = []string{
	"", ":wake", ":queue", ":qexp", ":rec",
	":sem", ":sem:holders", ":sem:queue", ":sem:qdead", ":sem:fence", ":sem:wake",
}

// names returns every name of the lock and of the semaphore on (prefix,
// key), in the order of suffixes.
func names(prefix, key string) []string {
	k := New(prefix, key)
	sem, wake := Semaphore(prefix, key)
	return append([]string{k.Lock, k.Wake, k.Queue(), k.QExp(), Record(prefix, key)}, append(sem, wake)...)
}

// parse is a left inverse of names: it returns the prefix, the key and the
// kind (an index into suffixes) of a name. That one exists proves that no
// name stands for two (prefix, key, kind), for the prefixes the options
// accept (without '{' or '}').
func parse(name string) (prefix, key string, kind int, ok bool) {
	prefix, rest, ok := strings.Cut(name, "{")
	if !ok {
		return "", "", 0, false
	}
	tag, suffix, ok := strings.Cut(rest, "}")
	if !ok {
		return "", "", 0, false
	}
	kind = -1
	for i, s := range suffixes {
		if suffix == s {
			kind = i
		}
	}
	if kind < 0 {
		return "", "", 0, false
	}
	var b strings.Builder
	for i := 0; i < len(tag); i++ {
		if tag[i] != '%' {
			b.WriteByte(tag[i])
			continue
		}
		switch {
		case strings.HasPrefix(tag[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(tag[i:], "%7D"):
			b.WriteByte('}')
		default:
			return "", "", 0, false
		}
		i += 2
	}
	return prefix, b.String(), kind, true
}

// words returns every string of at most n bytes over alphabet.
func words(alphabet string, n int) []string {
	out, level := []string{""}, []string{""}
	for range n {
		var next []string
		for _, w := range level {
			for i := 0; i < len(alphabet); i++ {
				next = append(next, w+alphabet[i:i+1])
			}
		}
		out = append(out, next...)
		level = next
	}
	return out
}

// checkNames fails unless every name of (prefix, key) parses back into it
// and its kind, and all of them hash to one Cluster slot.
func checkNames(t *testing.T, prefix, key string) {
	ns := names(prefix, key)
	slot := Slot(ns[0])
	for kind, n := range ns {
		p, k, gotKind, ok := parse(n)
		if !ok || p != prefix || k != key || gotKind != kind {
			require.Failf(t, "ambiguous name", "(%q, %q) names %q, which parses into (%q, %q, %d, %v)", prefix, key, n, p, k, gotKind, ok)
		}
		if s := Slot(n); s != slot {
			require.Failf(t, "names apart", "(%q, %q): %q in slot %d, %q in %d", prefix, key, ns[0], slot, n, s)
		}
	}
}

// Every (prefix, key) pair of up to 2 and 3 bytes, over the bytes that could
// make two names meet (braces in keys, the escapes' bytes, the suffixes'
// colon, a binary byte), names distinct keys in one slot.
func TestNamesInjective(t *testing.T) {
	t.Parallel()
	prefixes := words(":%7D25w\xff", 2)
	ks := words("{}%7D25:\xff", 3)
	for _, p := range prefixes {
		for _, k := range ks[1:] { // an empty key is refused
			checkNames(t, p, k)
		}
	}
}

func FuzzNames(f *testing.F) {
	f.Add("redislock:", "k")
	f.Add("a:", "b}:queue")
	f.Add("", "%7D}")
	f.Add("p%", "\x00\xff{")
	f.Fuzz(func(t *testing.T, prefix, key string) {
		if key == "" || strings.ContainsAny(prefix, "{}") {
			t.Skip("refused by the options and Obtain")
		}
		checkNames(t, prefix, key)
	})
}
