package pglock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
)

// SchemaVersion is the version of the schema this library writes, recorded
// as the lease table's comment ("redislock pglock schema v1").
const SchemaVersion = 1

const schemaComment = "redislock pglock schema v"

// maxNameLen leaves room for most of the derived names' suffixes within
// PostgreSQL's 63-byte identifiers; PostgreSQL cuts a longer derived name
// (an index of a long table name) to 63 bytes, which stays unambiguous.
const maxNameLen = 56

// derivedSuffixes end the names of a lease table's records table, fence
// sequence and indexes, in its schema. A table name may not end with one
// ("_records_expires" ends with "_expires"): then no table's name is
// another's derived name, even where PostgreSQL cuts a long name to 63
// bytes, so two tables never share a relation.
var derivedSuffixes = []string{"_records", "_fence", "_expires"}

// ErrSchema means the lease table exists but was not created by this
// library, or at a newer schema version than it knows, or (WithMigrate
// off) is missing.
var ErrSchema = errors.New("redislock: lease table schema mismatch")

// names are the SQL names of one Client's objects, quoted for statements.
type names struct {
	table    string // as given, for messages
	schema   string // "" when unqualified
	base     string // the table's own name
	leases   string // quoted, qualified
	records  string
	fence    string // the sequence, quoted
	fenceLit string // the sequence as a regclass literal for nextval
	channel  string // LISTEN channel of releases
	rawLease string // unquoted qualified name, for to_regclass
}

func parseTable(table string) (names, error) {
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return names{}, lease.Invalid("table %q: at most schema.name", table)
	}
	for i, p := range parts {
		if !isIdent(p) {
			return names{}, lease.Invalid("table %q: %q is not an unquoted identifier of at most %d bytes (letters, digits, _)", table, p, maxNameLen)
		}
		// An unquoted identifier means its lower case, in PostgreSQL as
		// here: "T3redMixed" is the table t3redmixed.
		parts[i] = strings.ToLower(p)
	}
	n := names{table: table, base: parts[len(parts)-1]}
	for _, s := range derivedSuffixes {
		if strings.HasSuffix(n.base, s) {
			return names{}, lease.Invalid("table %q: a name ending with %q could be another table's records table, fence or index", table, s)
		}
	}
	if len(parts) == 2 {
		n.schema = parts[0]
	}
	q := func(name string) string {
		if n.schema == "" {
			return pgx.Identifier{name}.Sanitize()
		}
		return pgx.Identifier{n.schema, name}.Sanitize()
	}
	n.leases = q(n.base)
	n.records = q(n.base + "_records")
	n.fence = q(n.base + "_fence")
	n.fenceLit = quoteLiteral(n.fence)
	n.rawLease = n.leases
	sum := sha256.Sum256([]byte(strings.Join(parts, "."))) // one channel per table, however its name is spelt
	n.channel = "redislock_" + hex.EncodeToString(sum[:])[:20]
	return n, nil
}

func isIdent(s string) bool {
	if s == "" || len(s) > maxNameLen || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// checkText refuses strings PostgreSQL's text type cannot hold.
func checkText(what, s string) error {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return lease.Invalid("%s %q: PostgreSQL text needs valid UTF-8 without NUL bytes", what, s)
	}
	return nil
}

// MaxKeyLen bounds a key's length in bytes: the lease table's primary key
// is a B-tree, whose entries must fit a third of a page.
const MaxKeyLen = 2048

func checkKey(key string) error {
	if err := backend.CheckKey(key); err != nil {
		return err
	}
	if len(key) > MaxKeyLen {
		return lease.Invalid("key of %d bytes is longer than %d", len(key), MaxKeyLen)
	}
	return checkText("key", key)
}

// migration is one schema version's DDL; each statement is idempotent.
type migration struct {
	version int
	sql     []string
}

func (n names) migrations() []migration {
	return []migration{{version: 1, sql: []string{
		// Fences: one sequence per lease table, strictly increasing across
		// every grant of every key. CACHE 1 (each nextval goes to the
		// shared sequence; a session cache would hand out values out of
		// order across sessions), NO CYCLE (never wraps around).
		`CREATE SEQUENCE IF NOT EXISTS ` + n.fence + ` AS bigint MINVALUE 1 NO MAXVALUE CACHE 1 NO CYCLE`,
		// One row per key. token: the grant's random token ('' once
		// released); expires_at: end of the lease on the database's clock;
		// wanted: a waiter asked to be notified at the release.
		`CREATE TABLE IF NOT EXISTS ` + n.leases + ` (
	name        text        PRIMARY KEY,
	token       text        NOT NULL,
	holder      text        NOT NULL DEFAULT '',
	fence       bigint      NOT NULL,
	wanted      boolean     NOT NULL DEFAULT false,
	acquired_at timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL
)`,
		`CREATE INDEX IF NOT EXISTS ` + pgx.Identifier{n.base + "_expires"}.Sanitize() + ` ON ` + n.leases + ` (expires_at)`,
		// Fenced records of the Store; expires_at NULL: no expiry.
		`CREATE TABLE IF NOT EXISTS ` + n.records + ` (
	name       text        PRIMARY KEY,
	value      bytea       NOT NULL,
	fence      bigint      NOT NULL,
	expires_at timestamptz
)`,
		`CREATE INDEX IF NOT EXISTS ` + pgx.Identifier{n.base + "_records_expires"}.Sanitize() + ` ON ` + n.records + ` (expires_at) WHERE expires_at IS NOT NULL`,
	}}}
}

// Schema returns the SQL that New runs (WithMigrate on) to create the
// tables of table ("" for DefaultTable), for those who create them by hand.
// Every statement is idempotent; the last one records the version.
func Schema(table string) (string, error) {
	if table == "" {
		table = DefaultTable
	}
	n, err := parseTable(table)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, m := range n.migrations() {
		for _, s := range m.sql {
			b.WriteString(s)
			b.WriteString(";\n")
		}
	}
	fmt.Fprintf(&b, "COMMENT ON TABLE %s IS %s;\n", n.leases, quoteLiteral(schemaComment+strconv.Itoa(SchemaVersion)))
	return b.String(), nil
}

// migrateLockID serializes concurrent migrations in one database
// (pg_advisory_xact_lock: released at COMMIT, so it works behind a
// transaction pooler too).
const migrateLockID = 0x72656469736c6f63 // "redisloc"

// migrate creates or upgrades the schema (migrate) or checks it. A schema
// that is current is only read, without the migration lock, so that a
// lock_timeout cannot end New while another client migrates.
func (n names) migrate(ctx context.Context, pool *pgxpool.Pool, migrate bool) error {
	if !migrate {
		v, err := n.version(ctx, pool)
		switch {
		case err != nil:
			return err
		case v == 0:
			return fmt.Errorf("%w: table %s does not exist (WithMigrate is off; see Schema)", ErrSchema, n.table)
		case v != SchemaVersion:
			return fmt.Errorf("%w: table %s is at version %d, want %d (WithMigrate is off; see Schema)", ErrSchema, n.table, v, SchemaVersion)
		}
		return nil
	}
	// The version comment commits with the tables, so reading it shows
	// them. Any other answer is read again under the lock: without it, a
	// read can see another New's table (the catalog's latest state)
	// without its comment (the statement's snapshot).
	if v, err := n.version(ctx, pool); err == nil && v == SchemaVersion {
		return nil
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockID)); err != nil {
			return fmt.Errorf("redislock: migrate %s: %w", n.table, err)
		}
		v, err := n.version(ctx, tx)
		if err != nil {
			return err
		}
		switch {
		case v == SchemaVersion:
			return nil
		case v > SchemaVersion:
			return fmt.Errorf("%w: table %s is at version %d, newer than this library's %d", ErrSchema, n.table, v, SchemaVersion)
		}
		for _, m := range n.migrations() {
			if m.version <= v {
				continue
			}
			for _, s := range m.sql {
				if _, err := tx.Exec(ctx, s); err != nil {
					return fmt.Errorf("redislock: migrate %s to v%d: %w", n.table, m.version, err)
				}
			}
		}
		_, err = tx.Exec(ctx, `COMMENT ON TABLE `+n.leases+` IS `+quoteLiteral(schemaComment+strconv.Itoa(SchemaVersion)))
		return err
	})
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// version returns the schema version of the lease table, 0 if it does not
// exist, or ErrSchema if it exists without this library's comment.
func (n names) version(ctx context.Context, q querier) (int, error) {
	var exists bool
	var comment *string
	err := q.QueryRow(ctx, `SELECT c IS NOT NULL, obj_description(c, 'pg_class') FROM to_regclass($1) AS c`, n.rawLease).Scan(&exists, &comment)
	if err != nil {
		return 0, fmt.Errorf("redislock: schema of %s: %w", n.table, err)
	}
	if !exists {
		return 0, nil
	}
	if comment != nil {
		if v, err := strconv.Atoi(strings.TrimPrefix(*comment, schemaComment)); err == nil && strings.HasPrefix(*comment, schemaComment) {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: table %s exists but was not created by this library (its comment is not %q)", ErrSchema, n.table, schemaComment+"N")
}
