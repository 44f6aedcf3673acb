// Command first is the README's first program: it takes a lock, gives it
// back, and runs a job under a lock that is renewed while the job runs.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
)

func main() {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{
		Addr: addr,
		// A lock call must end at its context's deadline, not at the
		// socket's: let go-redis apply the context to every read and write.
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
	})
	defer rdb.Close()

	client := redislock.New(rdb) // options given here are every call's defaults
	defer client.Close()         // waits for background clean-up

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// One attempt: a grant, contention (ErrNotObtained) or a Redis error.
	lock, err := client.Obtain(ctx, "report", 10*time.Second)
	switch {
	case errors.Is(err, redislock.ErrNotObtained):
		fmt.Println("someone else holds the report lock")
		return
	case err != nil:
		log.Fatal(err) // Redis unreachable, an error reply, bad input
	}
	fmt.Println("holding", lock.Key(), "with fence", lock.Fence())
	if err := lock.Release(ctx); err != nil {
		log.Fatal(err)
	}

	// Run obtains the lock, renews it while the job runs, cancels the job's
	// ctx if it is lost, and releases it. With WithRetry it waits for the
	// lock up to ctx's deadline; without, it makes one attempt.
	err = client.Run(ctx, "nightly-cleanup", 5*time.Second, func(ctx context.Context, l *redislock.Lock) error {
		fmt.Println("cleaning up under fence", l.Fence())
		return nil // send l.Fence() with each write the job makes
	}, redislock.WithRetry(redislock.ExponentialBackoff(10*time.Millisecond, 200*time.Millisecond)))
	if err != nil {
		log.Fatal(err) // ErrNotObtained, ErrLockLost, the job's error, ...
	}
}
