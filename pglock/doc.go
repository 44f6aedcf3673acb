// Package pglock provides the locks of redislock on PostgreSQL, through a
// pgx v5 pool: leases in a table, with fences, renewal that reports loss,
// waiting woken by LISTEN/NOTIFY, locks that share a transaction with the
// work they protect, and PostgreSQL's advisory locks where their limits
// fit. It implements the lease contract (lease.Locker, lease.Store), so
// the pattern packages (leader election, deduplication) run on it
// unchanged, and its Client has the shape of the Redis client: code
// switches backends by changing the constructor.
//
//	c, err := pglock.New(ctx, pool) // creates its tables if needed
//	l, err := c.Obtain(ctx, "report:2026-12", time.Minute, pglock.WithRetry(pglock.LinearBackoff(50*time.Millisecond)))
//	defer l.Release(ctx)
//
// # Lease table
//
// A lock is a row of the lease table (default "redislock_leases"; see
// Schema for the SQL): the key, the grant's random token, the holder
// identity, the fence, and when the lease was taken and ends. Obtain is one
// INSERT ... ON CONFLICT DO UPDATE ... WHERE the row is released or expired,
// returning the grant; Refresh and Release change the row only where the
// token is this grant's. Every time is the database's clock_timestamp(): the
// client sends durations, never timestamps, so client clocks may be wrong
// by any amount. A lease ends when the database's clock passes its end; a
// step forward of that clock shortens leases. Lock.ValidUntil is the
// holder's conservative view (request start + TTL - drift, on the client's
// monotonic clock).
//
// Every operation on lease-table locks and on the Store is one statement
// and keeps nothing in the session (no prepared statements of its own, no
// SET, no session locks), so it works behind a transaction pooler such as
// PgBouncer in transaction mode and with any pgx query mode (use
// QueryExecModeExec or SimpleProtocol where the pooler does not support
// prepared statements).
//
// # Fences
//
// Fences come from one BIGINT sequence per table (CACHE 1, NO CYCLE):
// strictly increasing across all grants of all keys, durable with the
// database (and replicated with it). A takeover of an existing row draws
// its fence under the row's lock, after the previous grant committed, so
// it is higher than that grant's even when the statement had to wait. A
// first grant of a key (no row yet) draws it when its statement starts;
// Release therefore keeps the row (released) and Cleanup deletes rows only
// after WithRetention (default 1 h), so a grant's fence could come out
// below an earlier one's only if its statement stalled inside the server,
// between starting and inserting, for longer than that. Send l.Fence() with
// every write to the protected data and refuse lower ones (Store does that
// for records; in SQL: "UPDATE ... SET ..., fence = $1 WHERE id = $2 AND
// fence <= $1"). With asynchronous replication, a failover can lose the
// last committed grants and fences, as it loses other transactions.
//
// # Waiting
//
// With a retry strategy, a waiter whose attempt found the lock held marks
// the row wanted in the same statement, and waits on the Client's
// listening connection (one per Client, opened at the first wait; LISTEN
// needs a session of its own, so behind a transaction pooler it connects
// with WithSessionConfig, or waiters poll). The holder's Release notifies
// in its own statement, only when the row is wanted. The mark skips a row
// that another transaction holds locked rather than wait for it; that
// release then does not notify. Waits are bounded by
// the backoff and by the holder's remaining lease, so a lost notification
// or a listener that is down costs at most one backoff (WithNotify).
//
// # Transactions
//
// RunTx runs fn in a transaction while the lease is renewed, and before
// COMMIT verifies in that transaction that the lease is still held and
// locks its row (Lock.Verify), so that fn's writes commit only under the
// lock. A dropped connection rolls the transaction back, leaving neither
// writes nor a lock. An acquire statement cut off on the client (its ctx
// ended, the connection broke) is released in the background once its
// server backend has ended, so that no phantom lock outlives it.
//
// # Advisory locks
//
// ObtainAdvisory and RunAdvisory take session advisory locks
// (pg_try_advisory_lock) on a connection of their own, all or none and in
// canonical order (ascending AdvisoryID), so that holders of several keys
// never deadlock. They have no TTL, no renewal and no fence: they are held
// exactly as long as the session, which the server ends with the
// connection; a watcher cancels the holder's Context when the connection
// is lost (at once when the server closes it, within a second when it
// breaks silently). Each held lock keeps a connection busy. Behind a
// transaction pooler they would be left on a server session the pooler
// hands to others: they are refused there (WithTransactionPooler, or when
// the statement runs in another backend than the connection was opened
// with). RunAdvisoryTx takes transaction advisory locks
// (pg_try_advisory_xact_lock), released by COMMIT or ROLLBACK, which work
// behind any pooler. Use the lease locks where a lock must survive a
// connection, expire, or fence.
//
// # Server settings
//
// lock_timeout and statement_timeout (set on the role or the database, on
// the pool's connections with RuntimeParams, or by SET) apply to the
// library's statements as to any. Behind a transaction pooler, set them on
// the role or the database: a SET stays on a server session that others
// get next, and PgBouncer refuses them as startup parameters
// (RuntimeParams). The statements wait only for a row that another transaction
// holds locked (a transaction that read it FOR UPDATE or FOR SHARE, or
// RunTx's between its Verify and its COMMIT), and a timeout that ends such
// a wait is reported as such:
//   - Obtain decides on a held lease without waiting (the wanted mark
//     skips a locked row). Taking a free row that another transaction
//     holds locked waits; a timeout of that wait is contention: Obtain
//     retries per WithRetry and ends with ErrNotObtained.
//   - Refresh, Release, Verify and the Store's Put and Delete wait for
//     their row; a timeout of that wait is ErrRowLocked, and the statement
//     changed nothing.
//   - TTL, Inspect and the Store's Get read without locks, Cleanup skips
//     locked rows, and the advisory locks use pg_try_ functions, which
//     never wait: a statement timeout ends them only on a slow server.
//   - New only reads a current schema; creating or migrating it waits for
//     a migration in progress (a transaction advisory lock), which a lock
//     timeout ends with an error.
//   - In RunTx and RunAdvisoryTx, fn's statements run under the same
//     settings; fn may change them with SET LOCAL, which lasts until the
//     transaction ends (also behind a pooler) and applies to Verify.
//
// A lock timeout (SQLSTATE 55P03) comes only from a lock wait, so it is
// always taken as one; a wait for the whole table (LOCK TABLE, DDL) counts
// too. A statement timeout (57014) is taken as one only when its context
// names the row it waited for ("while locking tuple (0,1) in relation
// ..."). A statement that was queued behind another waiter for the same
// row gets no such context: its statement timeout is returned as the
// server's error, as one on a slow server is. Set lock_timeout below
// statement_timeout so that every lock wait is reported as one.
//
// # Clean-up
//
// Released and expired rows stay until Cleanup deletes them, at most a
// limit per pass, rows older than the retention only; StartCleanup runs it
// in the background on a Cleaner, stopped by Close.
package pglock
