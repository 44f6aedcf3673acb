// Command fencedsql shows fenced writes to PostgreSQL: every row carries
// the fence of the last lock holder that wrote it, and an update goes
// through only with a higher fence, so that a holder whose lease ran out
// (it was paused, partitioned, slow) cannot overwrite what a newer holder
// wrote.
//
//	go run .                                   # embedded miniredis, PostgreSQL on 127.0.0.1:5432
//	REDIS_ADDR=127.0.0.1:6379 DATABASE_URL=postgres://... go run .
//
// The lock keeps holders apart while their leases hold; the fence check in
// the UPDATE is what keeps a stale holder out once a lease has ended:
//
//	UPDATE accounts SET balance = $3, fence = $1 WHERE id = $2 AND fence < $1
//
// Zero rows updated means a newer holder has written (or the row is
// missing): the write is refused, and the stale holder learns it.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
)

// DefaultDatabaseURL is the PostgreSQL this example and its tests use
// unless DATABASE_URL says otherwise.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// DB is what the fenced writes need of pgx: a *pgx.Conn, a *pgxpool.Pool
// or a pgx.Tx.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CreateAccounts creates the table: one row per account, with the fence of
// its last write (0: never written under a lock).
func CreateAccounts(ctx context.Context, db DB, table string) error {
	_, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+pgx.Identifier{table}.Sanitize()+` (
		id      bigint PRIMARY KEY,
		balance bigint NOT NULL,
		fence   bigint NOT NULL DEFAULT 0
	)`)
	return err
}

// OpenAccount inserts an account with no fence yet.
func OpenAccount(ctx context.Context, db DB, table string, id, balance int64) error {
	_, err := db.Exec(ctx, `INSERT INTO `+pgx.Identifier{table}.Sanitize()+` (id, balance) VALUES ($1, $2)`, id, balance)
	return err
}

// SetBalance writes balance to account id with the writer's fence, only
// if the row's fence is lower: a holder whose lock was superseded, and
// whose successor has written, gets an error matching
// redislock.ErrStaleFence and changes nothing. The check and the write are
// one statement, so no other write can come between them.
//
// The strict "<" refuses a second write with the same fence too: one write
// per grant. A holder that writes a row several times under one grant
// uses "fence <= $1" instead; both refuse stale holders.
func SetBalance(ctx context.Context, db DB, table string, id, balance, fence int64) error {
	tag, err := db.Exec(ctx, `UPDATE `+pgx.Identifier{table}.Sanitize()+`
		SET balance = $3, fence = $1
		WHERE id = $2 AND fence < $1`, fence, id, balance)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		var newest int64
		switch err := db.QueryRow(ctx, `SELECT fence FROM `+pgx.Identifier{table}.Sanitize()+` WHERE id = $1`, id).Scan(&newest); {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("fencedsql: account %d does not exist", id)
		case err != nil:
			return err
		}
		return fmt.Errorf("%w: fence %d, account %d was written with fence %d", redislock.ErrStaleFence, fence, id, newest)
	}
	return nil
}

// Balance reads an account and the fence that wrote it.
func Balance(ctx context.Context, db DB, table string, id int64) (balance, fence int64, err error) {
	err = db.QueryRow(ctx, `SELECT balance, fence FROM `+pgx.Identifier{table}.Sanitize()+` WHERE id = $1`, id).Scan(&balance, &fence)
	return balance, fence, err
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		m, err := miniredis.Run()
		if err != nil {
			log.Fatal(err)
		}
		defer m.Close()
		addr = m.Addr()
		fmt.Println("REDIS_ADDR not set: using an embedded miniredis at", addr)
	}
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		url = DefaultDatabaseURL
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		log.Fatalf("PostgreSQL at %s: %v", url, err)
	}
	defer conn.Close(context.Background())
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := demo(ctx, conn, rdb); err != nil {
		log.Fatal(err)
	}
}

func demo(ctx context.Context, conn *pgx.Conn, rdb *redis.Client) error {
	// A temporary table: it lives as long as this connection.
	table := "fencedsql_demo"
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE `+table+` (id bigint PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0)`); err != nil {
		return err
	}
	if err := OpenAccount(ctx, conn, table, 7, 100); err != nil {
		return err
	}
	locker := redislock.New(rdb, redislock.WithPrefix("fencedsql:"))
	defer locker.Close()

	// The first holder stalls (a GC pause, a stopped VM) past its lease,
	// and a second holder takes the lock.
	old, err := locker.Obtain(ctx, "account:7", 5*time.Second)
	if err != nil {
		return err
	}
	fmt.Println("holder A obtained the lock and stalls")
	_ = old.Release(ctx) // stands for A's lease running out while A stalls
	cur, err := locker.Obtain(ctx, "account:7", 5*time.Second)
	if err != nil {
		return err
	}
	defer cur.Release(ctx)
	fmt.Printf("holder B obtained it with a higher fence (%v)\n", cur.Fence() > old.Fence())
	if err := SetBalance(ctx, conn, table, 7, 150, cur.Fence()); err != nil {
		return err
	}
	fmt.Println("holder B set the balance to 150")

	// A wakes up and, still believing it holds the lock, writes.
	err = SetBalance(ctx, conn, table, 7, 90, old.Fence())
	fmt.Println("holder A's late write:", err)
	balance, fence, err := Balance(ctx, conn, table, 7)
	if err != nil {
		return err
	}
	fmt.Printf("account 7: balance %d, written by B's fence (%v)\n", balance, fence == cur.Fence())
	return nil
}
