package keys

import "testing"

func TestNew(t *testing.T) {
	t.Parallel()
	k := New("p:", "a}b%")
	const l = "p:{a%7Db%25}"
	want := Lock{Lock: l, Wake: l + ":wake", Boxed: [1]any{l}}
	if k != want {
		t.Fatalf("New = %+v, want %+v", k, want)
	}
	if k.Queue() != l+":queue" || k.QExp() != l+":qexp" {
		t.Fatalf("fair keys %q, %q", k.Queue(), k.QExp())
	}
	if p := New("p:", "plain"); p.Lock != "p:{plain}" || p.Wake != "p:{plain}:wake" {
		t.Fatalf("New = %+v", p)
	}
	if r := Record("p:", "a}b%"); r != l+":rec" {
		t.Fatalf("Record = %q", r)
	}
	if New("p:", "a}").Lock == New("p:", "a%7D").Lock {
		t.Fatal("distinct keys share a lock key")
	}
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
