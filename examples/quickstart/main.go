// Command quickstart takes, renews and gives back a lock, and shows a fence
// rejecting a stale write.
//
//	go run ./examples/quickstart                          # embedded miniredis
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/quickstart # your Redis
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
)

func main() {
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
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		log.Fatalf("redis at %s: %v", addr, err)
	}

	locker := redislock.New(rdb, redislock.WithPrefix("quickstart:"))
	defer locker.Close()

	// 1. Obtain and release.
	lock, err := locker.Obtain(ctx, "report", 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("obtained %q fence=%d valid for %v\n", lock.Key(), lock.Fence(), time.Until(lock.ValidUntil()).Round(time.Millisecond))
	if _, err := locker.Obtain(ctx, "report", 5*time.Second); errors.Is(err, redislock.ErrNotObtained) {
		fmt.Println("a second Obtain is refused while it is held:", err)
	}
	if err := lock.Release(ctx); err != nil {
		log.Fatal(err)
	}

	// 2. Eight workers share one counter; the lock serialises them.
	var wg sync.WaitGroup
	counter := 0
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				err := locker.Run(ctx, "counter", time.Second, func(ctx context.Context, l *redislock.Lock) error {
					counter++ // safe: one holder at a time
					return nil
				}, redislock.WithRetry(redislock.ExponentialBackoff(time.Millisecond, 20*time.Millisecond)))
				if err != nil {
					log.Printf("worker %d: %v", w, err)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Println("8 workers x 5 increments under Run:", counter)

	// 3. Fencing: a stale holder's write is rejected by the resource.
	old, err := locker.Obtain(ctx, "account", time.Second)
	if err != nil {
		log.Fatal(err)
	}
	_ = old.Release(ctx) // stands for a lease that ran out while old stalled
	cur, err := locker.Obtain(ctx, "account", time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer cur.Release(ctx)
	_ = redislock.FencedSet(ctx, rdb, "quickstart:balance", "150", cur.Fence(), time.Minute)
	err = redislock.FencedSet(ctx, rdb, "quickstart:balance", "100", old.Fence(), time.Minute)
	v, f, _ := redislock.FencedGet(ctx, rdb, "quickstart:balance")
	fmt.Printf("stale write: %v\nbalance=%s written by fence %d\n", err, v, f)
}
