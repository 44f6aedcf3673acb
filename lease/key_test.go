package lease_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease"
)

func TestKeyLayout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ prefix, id, want string }{
		{"dedup:", "email:1", "dedup:|email:1"},
		{"dedup:email:", "1", "dedup:email:|1"},
		{"", "x", "|x"},
		{"a|b", "c", "a%7Cb|c"},
		{"50%", "|", "50%25||"},
		{"{t}:", "}{", "{t}:|}{"},
	} {
		assert.Equal(t, c.want, lease.Key(c.prefix, c.id), "Key(%q, %q)", c.prefix, c.id)
	}
}

// splitKey is a left inverse of lease.Key: that one exists proves Key
// injective, which is what the tests check, for the pairs they try.
func splitKey(key string) (prefix, id string, ok bool) {
	p, id, ok := strings.Cut(key, "|")
	if !ok {
		return "", "", false
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			b.WriteByte(p[i])
			continue
		}
		switch {
		case strings.HasPrefix(p[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(p[i:], "%7C"):
			b.WriteByte('|')
		default:
			return "", "", false
		}
		i += 2
	}
	return b.String(), id, true
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

// Every pair of strings of up to 3 bytes over the bytes that could make
// two keys meet (the separator, the escapes' bytes, braces, a colon, a
// binary byte) gives a key that splits back into its pair.
func TestKeyInjective(t *testing.T) {
	t.Parallel()
	ws := words("|%7C25:{\xff", 3)
	for _, p := range ws {
		for _, id := range ws {
			gp, gid, ok := splitKey(lease.Key(p, id))
			if !ok || gp != p || gid != id {
				require.Failf(t, "not injective", "Key(%q, %q) = %q splits into (%q, %q, %v)", p, id, lease.Key(p, id), gp, gid, ok)
			}
		}
	}
}

func FuzzKey(f *testing.F) {
	f.Add("dedup:", "email:1", "dedup:email:", "1")
	f.Add("a|", "b", "a", "|b")
	f.Add("%7C", "", "|", "")
	f.Add("", "\x00\xff", "\x00", "\xff")
	f.Fuzz(func(t *testing.T, p1, id1, p2, id2 string) {
		k1, k2 := lease.Key(p1, id1), lease.Key(p2, id2)
		gp, gid, ok := splitKey(k1)
		require.True(t, ok && gp == p1 && gid == id1, "Key(%q, %q) = %q splits into (%q, %q)", p1, id1, k1, gp, gid)
		require.Equal(t, p1 == p2 && id1 == id2, k1 == k2, "(%q, %q) and (%q, %q) give %q and %q", p1, id1, p2, id2, k1, k2)
	})
}
