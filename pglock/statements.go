package pglock

import "strings"

// statements are the SQL of one Client, one per operation, each a single
// statement (no session state: they run unchanged behind a transaction
// pooler and in any pgx query mode). Every time is the database's
// clock_timestamp(); the client sends durations only. The header of each
// names its parameters ($n) and its result.
type statements struct {
	acquire, refresh, release, ttl, inspect, verify string
	put, get, del                                   string
	cleanLeases, cleanRecords                       string
}

// leftUS is the remaining lease of a row in microseconds.
const leftUS = `(extract(epoch FROM expires_at - clock_timestamp()) * 1e6)::bigint`

func (n names) statements() statements {
	r := strings.NewReplacer("LEASES", n.leases, "RECORDS", n.records, "FENCE", n.fenceLit, "LEFT_US", leftUS)
	return statements{
		// acquire: $1 name, $2 token, $3 holder, $4 TTL in ms, $5 mark the
		// row wanted when held. One row: (fence > 0, 0) when granted; (0,
		// the holder's remaining lease in µs) when held; no row when held
		// by a grant newer than the statement's snapshot.
		//
		// g inserts the row or takes over a released or expired one. A
		// takeover draws its fence under the row's lock, after the
		// previous grant committed, so it is higher than that grant's.
		// g does nothing when the statement's snapshot shows the lease
		// held: ON CONFLICT DO UPDATE locks the row even when its WHERE is
		// false, which would give every failed attempt a transaction id,
		// a commit record and a WAL flush; so a contended attempt is
		// read-only. The decision is still made under the row's lock.
		// m marks a held row wanted (a waiter asks the release to notify)
		// and returns nothing; it runs after g (it reads g) and only when
		// g granted nothing. The mark is a hint: it skips a row that
		// another transaction has locked (SKIP LOCKED) rather than wait
		// for it, so a waiter's attempt never waits for a held lease's row
		// (a lock or statement timeout could end that wait), and the
		// release then does not notify: the waiter wakes at its backoff.
		acquire: r.Replace(`WITH g AS (
	INSERT INTO LEASES AS l (name, token, holder, fence, acquired_at, expires_at)
	SELECT $1, $2, $3, nextval(FENCE), clock_timestamp(), clock_timestamp() + $4::bigint * interval '1 millisecond'
	WHERE NOT EXISTS (SELECT FROM LEASES WHERE name = $1 AND token <> '' AND expires_at > clock_timestamp())
	ON CONFLICT (name) DO UPDATE SET
		token = EXCLUDED.token, holder = EXCLUDED.holder, fence = nextval(FENCE),
		wanted = false, acquired_at = clock_timestamp(),
		expires_at = clock_timestamp() + $4::bigint * interval '1 millisecond'
	WHERE l.token = '' OR l.expires_at <= clock_timestamp()
	RETURNING l.fence
), m AS (
	UPDATE LEASES SET wanted = true
	WHERE name = (SELECT name FROM LEASES
		WHERE $5::boolean AND name = $1 AND NOT wanted AND token <> '' AND expires_at > clock_timestamp()
			AND NOT EXISTS (SELECT FROM g)
		FOR NO KEY UPDATE SKIP LOCKED)
)
SELECT fence, 0::bigint FROM g
UNION ALL
SELECT 0, LEFT_US FROM LEASES
WHERE name = $1 AND token <> '' AND NOT EXISTS (SELECT FROM g)`),

		// refresh: $1 name, $2 token, $3 TTL in ms. Rows affected: 1 when
		// this grant still held the lease and it was extended, else 0.
		refresh: r.Replace(`UPDATE LEASES SET expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()`),

		// release: $1 name, $2 token, $3 channel. One row: (1 when this
		// grant held the lease and gave it back, else 0; 1 when waiters
		// were notified). The row is kept (token '', expired now) so that
		// the next grant's fence is drawn under its lock; the notification
		// (payload: the SHA-256 of name, hex) is sent at COMMIT, only when
		// a waiter marked the row wanted.
		release: r.Replace(`WITH r AS (
	UPDATE LEASES SET token = '', expires_at = clock_timestamp()
	WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()
	RETURNING wanted
)
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM (SELECT pg_notify($3, encode(sha256(convert_to($1, 'UTF8')), 'hex')) FROM r WHERE wanted) n)`),

		// ttl: $1 name, $2 token. One row (remaining lease in µs) while
		// this grant holds the lease, else none.
		ttl: r.Replace(`SELECT greatest(LEFT_US, 1) FROM LEASES WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()`),

		// inspect: $1 name. One row (holder, fence, remaining lease in µs,
		// whether a waiter asked to be notified) while the key is held, else
		// none.
		inspect: r.Replace(`SELECT holder, fence, greatest(LEFT_US, 1), wanted FROM LEASES
WHERE name = $1 AND token <> '' AND expires_at > clock_timestamp()`),

		// verify: $1 name, $2 token; run inside the caller's transaction.
		// One row while this grant holds the lease, else none. FOR SHARE
		// keeps the row from being taken over or changed until the
		// transaction ends.
		verify: r.Replace(`SELECT fence FROM LEASES
WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp() FOR SHARE`),

		// put: $1 name, $2 value, $3 fence, $4 TTL in ms (0: none). One
		// row: (1 when written, else 0; the fence of the record that
		// refused it, or NULL). A record with a higher fence refuses the
		// write unless it has expired.
		put: r.Replace(`WITH w AS (
	INSERT INTO RECORDS AS r (name, value, fence, expires_at)
	VALUES ($1, $2, $3, CASE WHEN $4::bigint > 0 THEN clock_timestamp() + $4::bigint * interval '1 millisecond' END)
	ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, fence = EXCLUDED.fence, expires_at = EXCLUDED.expires_at
	WHERE r.fence <= EXCLUDED.fence OR r.expires_at <= clock_timestamp()
	RETURNING 1
)
SELECT (SELECT count(*) FROM w), (SELECT fence FROM RECORDS WHERE name = $1)`),

		// get: $1 name. One row (value, fence, remaining TTL in µs, 0 for
		// none) for a live record, else none.
		get: r.Replace(`SELECT value, fence, CASE WHEN expires_at IS NULL THEN 0 ELSE greatest(LEFT_US, 1) END
FROM RECORDS WHERE name = $1 AND (expires_at IS NULL OR expires_at > clock_timestamp())`),

		// del: $1 name, $2 fence. One row: (1 when deleted, else 0; the
		// fence of a live record that refused it, or NULL).
		del: r.Replace(`WITH d AS (
	DELETE FROM RECORDS WHERE name = $1 AND (fence <= $2 OR expires_at <= clock_timestamp()) RETURNING 1
)
SELECT (SELECT count(*) FROM d),
	(SELECT fence FROM RECORDS WHERE name = $1 AND (expires_at IS NULL OR expires_at > clock_timestamp()))`),

		// cleanLeases: $1 limit, $2 retention in ms. Deletes at most $1
		// lease rows that expired (or were released) more than $2 ago,
		// skipping rows locked by others. Rows affected: how many.
		cleanLeases: r.Replace(`DELETE FROM LEASES WHERE name IN (
	SELECT name FROM LEASES WHERE expires_at < clock_timestamp() - $2::bigint * interval '1 millisecond'
	ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)`),

		// cleanRecords: $1 limit. Deletes at most $1 expired records.
		cleanRecords: r.Replace(`DELETE FROM RECORDS WHERE name IN (
	SELECT name FROM RECORDS WHERE expires_at <= clock_timestamp()
	ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)`),
	}
}
