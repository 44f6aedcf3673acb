package pglock_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

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
		if err := <-errs; err != nil {
			t.Fatalf("concurrent New: %v", err)
		}
	}
	newClient(t, admin, table) // once more
	schema := strings.Split(table, ".")[0]

	if _, err := admin.Exec(ctx, `CREATE TABLE `+schema+`.foreign_locks (lock_name text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pglock.New(ctx, admin, pglock.WithTable(schema+".foreign_locks")); !errors.Is(err, pglock.ErrSchema) {
		t.Fatalf("New on a foreign table: %v, want ErrSchema", err)
	}
	if _, err := pglock.New(ctx, admin, pglock.WithTable(schema+".by_hand"), pglock.WithMigrate(false)); !errors.Is(err, pglock.ErrSchema) {
		t.Fatalf("New without migration on a missing table: %v, want ErrSchema", err)
	}
	sql, err := pglock.Schema(schema + ".by_hand")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, sql); err != nil {
		t.Fatalf("Schema's SQL: %v", err)
	}
	if _, err := admin.Exec(ctx, sql); err != nil {
		t.Fatalf("Schema's SQL, again: %v", err)
	}
	c := newClient(t, admin, schema+".by_hand", pglock.WithMigrate(false))
	l, err := c.Obtain(ctx, "k", 10e9)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
}

// The README shows the schema SQL exactly as Schema returns it.
func TestSchemaInReadme(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	sql, err := pglock.Schema("")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```sql\n"+sql+"```") {
		t.Fatalf("README.md's schema differs from pglock.Schema(\"\"):\n%s", sql)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+schema+".T3redMixed").Scan(&n); err != nil || n != 1 {
		t.Fatalf("SELECT from the unquoted name: %d rows, %v; want the 1 lease", n, err)
	}
}
