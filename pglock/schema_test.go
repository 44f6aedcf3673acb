package pglock_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/pglock"
)

// New creates the schema once and again without harm (also concurrently);
// refuses a table that is not its own; with WithMigrate off it needs the
// tables, which Schema's SQL creates.
func TestSchema(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	ctx := ctxFor(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			c, err := pglock.New(ctx, newPool(t), pglock.WithTable(table))
			if err == nil {
				_ = c.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		require.NoError(t, <-errs, "concurrent New")
	}
	newClient(t, admin, table) // once more
	schema := strings.Split(table, ".")[0]

	_, err := admin.Exec(ctx, `CREATE TABLE `+schema+`.foreign_locks (lock_name text PRIMARY KEY)`)
	require.NoError(t, err)
	_, err = pglock.New(ctx, admin, pglock.WithTable(schema+".foreign_locks"))
	require.ErrorIs(t, err, pglock.ErrSchema, "New on a foreign table, want ErrSchema")
	_, err = pglock.New(ctx, admin, pglock.WithTable(schema+".by_hand"), pglock.WithMigrate(false))
	require.ErrorIs(t, err, pglock.ErrSchema, "New without migration on a missing table, want ErrSchema")
	sql, err := pglock.Schema(schema + ".by_hand")
	require.NoError(t, err)
	_, err = admin.Exec(ctx, sql)
	require.NoError(t, err, "Schema's SQL")
	_, err = admin.Exec(ctx, sql)
	require.NoError(t, err, "Schema's SQL, again")
	c := newClient(t, admin, schema+".by_hand", pglock.WithMigrate(false))
	l, err := c.Obtain(ctx, "k", 10e9)
	require.NoError(t, err)
	_ = l.Release(ctx)
}

// The README shows the schema SQL exactly as Schema returns it.
func TestSchemaInReadme(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	sql, err := pglock.Schema("")
	require.NoError(t, err)
	require.True(t, strings.Contains(string(readme), "```sql\n"+sql+"```"), "README.md's schema differs from pglock.Schema(\"\"):\n%s", sql)
}

// A table name is an unquoted identifier, as the docs say: a mixed-case
// name is the lower-case table PostgreSQL means by it, reachable unquoted
// (not a quoted "T3redMixed" that plain SQL cannot name).
func TestTableNameUnquoted(t *testing.T) {
	schema := strings.Split(newTable(t), ".")[0]
	admin := newPool(t)
	ctx := ctxFor(t)
	c := newClient(t, admin, schema+".T3redMixed")
	l, err := c.Obtain(ctx, "k", time.Minute)
	require.NoError(t, err)
	defer l.Release(ctx)
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+schema+".T3redMixed").Scan(&n); err != nil || n != 1 {
		t.Fatalf("SELECT from the unquoted name: %d rows, %v; want the 1 lease", n, err)
	}
}
