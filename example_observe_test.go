package redislock_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/lease"
)

// Who holds a lock: the holder identity recorded with the grant, its fence
// and remaining TTL.
func ExampleClient_Inspect() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	locker := redislock.New(rdb, redislock.WithHolder("worker-7"))
	defer locker.Close()

	lock, err := locker.Obtain(ctx, "invoices", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)

	info, err := locker.Inspect(ctx, "invoices")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Held, info.Holder, info.Fence == lock.Fence(), info.TTL > 0)
	// Output: true worker-7 true true
}

// The Client as a lease.Locker: code written against the lease contract
// (the leader and dedup packages, your own) runs on Redis, on PostgreSQL
// (pglock) and on the in-memory Locker of lease/leasetest alike.
func ExampleClient_Locker() {
	rdb, done := exampleRedis()
	defer done()
	client := redislock.New(rdb)
	defer client.Close()
	var locker lease.Locker = client.Locker()

	err := lease.Run(context.Background(), locker, "rebuild-index", 10*time.Second,
		func(ctx context.Context, l lease.Lock) error {
			fmt.Println("rebuilding under fence", l.Fence() > 0)
			return nil
		}, lease.WithHolder("indexer"))
	if err != nil {
		log.Fatal(err)
	}
	// Output: rebuilding under fence true
}

// Logging the Client's events with log/slog: grants and releases at Debug,
// losses and failed renewals at Warn; never the token.
func ExampleWithLogger() {
	rdb, done := exampleRedis()
	defer done()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level:       slog.LevelDebug,
		ReplaceAttr: dropTimeAndDurations, // keeps the output stable for this example
	}))
	locker := redislock.New(rdb, redislock.WithLogger(logger))
	defer locker.Close()
	ctx := context.Background()

	lock, err := locker.Obtain(ctx, "report", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	_ = lock.Release(ctx)
	// Output:
	// level=DEBUG msg="redislock: obtained" key=report ttl=1m0s attempts=1
	// level=DEBUG msg="redislock: released" key=report
}

func dropTimeAndDurations(_ []string, a slog.Attr) slog.Attr {
	switch a.Key {
	case slog.TimeKey, "fence", "wait", "held":
		return slog.Attr{}
	}
	return a
}
