package pglock

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease"
)

// relations returns the names, as PostgreSQL keeps them (cut to 63 bytes),
// of the relations of the lease table base in its schema: the table, the
// records table, the fence sequence and the two indexes.
func relations(base string) []string {
	rs := []string{base, base + "_records", base + "_fence", base + "_expires", base + "_records_expires"}
	for i, r := range rs {
		if len(r) > 63 {
			rs[i] = r[:63]
		}
	}
	return rs
}

// No two table names the options accept share a relation: bases made of
// the derived names' suffixes and their pieces, short and at the length
// limit (where PostgreSQL cuts the derived names).
func TestDerivedNamesNeverMeet(t *testing.T) {
	t.Parallel()
	parts := []string{"a", "_records", "_fence", "_expires", "_rec", "ords", "_"}
	bases := []string{""}
	for range 3 {
		for _, b := range bases {
			for _, p := range parts {
				bases = append(bases, b+p)
			}
		}
	}
	for n := 40; n <= maxNameLen; n++ {
		long := strings.Repeat("x", n)
		bases = append(bases, long)
		for _, p := range parts {
			if len(long+p) <= maxNameLen {
				bases = append(bases, long+p)
			}
		}
	}
	owner := map[string]string{}
	accepted := 0
	for _, b := range bases {
		n, err := parseTable("s." + b)
		if err != nil {
			continue
		}
		accepted++
		for _, r := range relations(n.base) {
			if o, ok := owner[r]; ok && o != n.base {
				require.Failf(t, "tables meet", "tables %q and %q both use %q", o, n.base, r)
			}
			owner[r] = n.base
		}
	}
	assert.Greater(t, accepted, 100)
	for _, b := range []string{"locks_records", "locks_fence", "locks_expires", "locks_records_expires", "s.Locks_Records"} {
		_, err := parseTable(b)
		assert.ErrorIs(t, err, lease.ErrInvalidArgument, "table %q", b)
	}
}

// Clients on one table share its release channel, whatever case its name
// is written in; the default table's channel is fixed (SHA-256 of its name).
func TestChannelPerTable(t *testing.T) {
	t.Parallel()
	lower, err := parseTable("s.locks")
	require.NoError(t, err)
	mixed, err := parseTable("S.Locks")
	require.NoError(t, err)
	assert.Equal(t, lower.channel, mixed.channel)
	other, err := parseTable("s.locks2")
	require.NoError(t, err)
	assert.NotEqual(t, lower.channel, other.channel)
	def, err := parseTable(DefaultTable)
	require.NoError(t, err)
	assert.Equal(t, "redislock_f33d6886fecfe998256d", def.channel)
}
