package pglock_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redislock-go/redislock/pglock"
)

// examplePool connects to the test database; examples print what they
// would without one, so that they pass on machines without PostgreSQL.
func examplePool(ctx context.Context) (*pgxpool.Pool, bool) {
	p, err := pgxpool.New(ctx, dsn())
	if err == nil {
		err = p.Ping(ctx)
	}
	if err != nil {
		if p != nil {
			p.Close()
		}
		if os.Getenv("REDISLOCK_REQUIRE_POSTGRES") == "1" {
			panic(err)
		}
		return nil, false
	}
	return p, true
}

// dropExampleTables removes what the examples created.
func dropExampleTables(ctx context.Context, pool *pgxpool.Pool) {
	_, _ = pool.Exec(ctx, `DROP TABLE IF EXISTS example_leases, example_leases_records; DROP SEQUENCE IF EXISTS example_leases_fence`)
}

// Obtain a lease, write under its fence, release.
func ExampleClient_Obtain() {
	ctx := context.Background()
	pool, ok := examplePool(ctx)
	if !ok {
		fmt.Println("obtained: true")
		return
	}
	defer pool.Close()
	defer dropExampleTables(ctx, pool)
	c, err := pglock.New(ctx, pool, pglock.WithTable("example_leases"))
	if err != nil {
		panic(err)
	}
	defer c.Close()

	l, err := c.Obtain(ctx, "nightly-report", 30*time.Second,
		pglock.WithRetry(pglock.ExponentialBackoff(10*time.Millisecond, time.Second)),
		pglock.WithHolder("worker-1"))
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)
	fmt.Println("obtained:", l.Fence() > 0)
	// Output: obtained: true
}

// RunTx: the lock and the work commit together; the fence guards the row.
func ExampleClient_RunTx() {
	ctx := context.Background()
	pool, ok := examplePool(ctx)
	if !ok {
		fmt.Println("balance: 10")
		return
	}
	defer pool.Close()
	defer dropExampleTables(ctx, pool)
	c, err := pglock.New(ctx, pool, pglock.WithTable("example_leases"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	_, _ = pool.Exec(ctx, `DROP TABLE IF EXISTS example_account`)
	if _, err := pool.Exec(ctx, `CREATE TABLE example_account (id int PRIMARY KEY, balance int NOT NULL, fence bigint NOT NULL);
		INSERT INTO example_account VALUES (1, 0, 0)`); err != nil {
		panic(err)
	}
	defer pool.Exec(ctx, `DROP TABLE example_account`)

	err = c.RunTx(ctx, "account:1", 10*time.Second, func(ctx context.Context, tx pgx.Tx, l *pglock.Lock) error {
		_, err := tx.Exec(ctx, `UPDATE example_account SET balance = balance + 10, fence = $1
			WHERE id = 1 AND fence <= $1`, l.Fence())
		return err
	})
	if err != nil {
		panic(err)
	}
	var balance int
	_ = pool.QueryRow(ctx, `SELECT balance FROM example_account WHERE id = 1`).Scan(&balance)
	fmt.Println("balance:", balance)
	// Output: balance: 10
}

// Advisory locks on several keys, in canonical order, tied to a
// connection.
func ExampleClient_RunAdvisory() {
	ctx := context.Background()
	pool, ok := examplePool(ctx)
	if !ok {
		fmt.Println("migrated")
		return
	}
	defer pool.Close()
	defer dropExampleTables(ctx, pool)
	c, err := pglock.New(ctx, pool, pglock.WithTable("example_leases"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	err = c.RunAdvisory(ctx, []string{"schema", "config"}, func(ctx context.Context) error {
		// ctx is cancelled if the locks' connection is lost.
		fmt.Println("migrated")
		return nil
	}, pglock.WithRetry(pglock.LinearBackoff(100*time.Millisecond)))
	if err != nil {
		panic(err)
	}
	// Output: migrated
}
