package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redislock-go/redislock"
)

// Waiting for a contended lock: with a retry strategy, Obtain waits for the
// holder's release (notified waiting is on by default), falling back to the
// backoff; ctx bounds the whole wait.
func ExampleWithNotify() {
	rdb, done := exampleRedis()
	defer done()
	locker := redislock.New(rdb)
	defer locker.Close() // stops the shared subscription connection
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	holder, err := locker.Obtain(ctx, "report", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond) // the holder's work, in an example
		holder.Release(ctx)
	}()

	l, err := locker.Obtain(ctx, "report", 10*time.Second,
		redislock.WithRetry(redislock.ExponentialBackoff(100*time.Millisecond, 2*time.Second)))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	fmt.Println("obtained after the release")
	// Output: obtained after the release
}

// Several keys as one lock: all or nothing, one fence per key.
func ExampleClient_ObtainMulti() {
	rdb, done := exampleRedis()
	defer done()
	locker := redislock.New(rdb)
	defer locker.Close()
	ctx := context.Background()

	m, err := locker.ObtainMulti(ctx, []string{"account:1", "account:2"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Release(ctx)
	fmt.Println("holding", m.Keys(), "fences set:", m.Fence("account:1") > 0 && m.Fence("account:2") > 0)

	_, err = locker.ObtainMulti(ctx, []string{"account:2", "account:3"}, 10*time.Second)
	fmt.Println(errors.Is(err, redislock.ErrNotObtained))
	// Output:
	// holding [account:1 account:2] fences set: true
	// true
}

// A fair lock grants waiters in arrival order.
func ExampleWithFair() {
	rdb, done := exampleRedis()
	defer done()
	locker := redislock.New(rdb, redislock.WithFair(true))
	defer locker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	err := locker.Run(ctx, "queue-worker", 5*time.Second, func(ctx context.Context, l *redislock.Lock) error {
		fmt.Println("my turn")
		return nil
	}, redislock.WithRetry(redislock.LinearBackoff(100*time.Millisecond)))
	if err != nil {
		log.Fatal(err)
	}
	// Output: my turn
}
