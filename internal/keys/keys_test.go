package keys

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNew(t *testing.T) {
	t.Parallel()
	k := New("p:", "a}b%")
	const l = "p:{a%7Db%25}"
	want := Lock{Lock: l, Wake: l + ":wake", Boxed: [1]any{l}}
	require.False(t, k != want, "New = %+v, want %+v", k, want)
	require.Equal(t, l+":queue", k.Queue(), "fair keys %q, %q", k.Queue(), k.QExp())
	require.Equal(t, l+":qexp", k.QExp(), "fair keys %q, %q", k.Queue(), k.QExp())
	if p := New("p:", "plain"); p.Lock != "p:{plain}" || p.Wake != "p:{plain}:wake" {
		t.Fatalf("New = %+v", p)
	}
	if r := Record("p:", "a}b%"); r != l+":rec" {
		t.Fatalf("Record = %q", r)
	}
	require.NotEqual(t, New("p:", "a%7D").Lock, New("p:", "a}").Lock, "distinct keys share a lock key")
}

func TestSlot(t *testing.T) {
	t.Parallel()
	// Values from Redis' CLUSTER KEYSLOT.
	for key, want := range map[string]uint16{
		"foo":                12182,
		"{user1000}.a":       3443,
		"{user1000}.b":       3443,
		"foo{}{bar}":         8363,
		"{}foo":              9500,
		"redislock:{k}":      Slot("k"),
		"redislock:{k}:wake": Slot("k"),
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}
