package pglock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/pglock"
)

// A table name that is another table's derived name (its records table,
// fence sequence or an index) is refused before any SQL, in either order:
// two Clients on different tables never share a relation.
func TestTableNamesNeverMeet(t *testing.T) {
	schema := strings.Split(newTable(t), ".")[0]
	admin := newPool(t)
	ctx := ctxFor(t)
	c := newClient(t, admin, schema+".kl")
	l, err := c.Obtain(ctx, "k", time.Minute)
	require.NoError(t, err)
	defer l.Release(ctx)
	require.NoError(t, c.Store().Put(ctx, "k", []byte("v"), l.Fence(), 0))
	for _, derived := range []string{"kl_records", "kl_fence", "kl_expires", "kl_records_expires", "other_records"} {
		other, err := pglock.New(ctx, admin, pglock.WithTable(schema+"."+derived))
		if err == nil {
			_ = other.Close()
		}
		assert.ErrorIs(t, err, lease.ErrInvalidArgument, "table %q beside %q", derived, "kl")
	}
	rec, err := c.Store().Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "v", string(rec.Value))
}
