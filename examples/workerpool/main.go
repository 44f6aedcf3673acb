// Command workerpool runs a pool of workers that each take jobs from a
// queue which delivers every job three times, and uses dedup so that every
// job's side effect happens once. A copy that finds its job running waits
// for the run's outcome (dedup.WithRetry) instead of being redelivered in a
// loop.
//
//	go run ./examples/workerpool                          # embedded miniredis
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/workerpool # your Redis
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/dedup"
	"github.com/redislock-go/redislock/lease"
)

const (
	workers    = 4
	orders     = 50
	deliveries = 3
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		log.Fatalf("redis at %s: %v", addr, err)
	}
	run := fmt.Sprint(time.Now().UnixNano()) // a fresh namespace per run

	// An at-least-once queue: every order is delivered three times, the
	// copies side by side so that they race.
	queue := make(chan string, orders*deliveries)
	var pending sync.WaitGroup
	for i := range orders {
		for range deliveries {
			pending.Add(1)
			queue <- fmt.Sprintf("order-%d", i)
		}
	}
	go func() {
		pending.Wait()
		close(queue)
	}()

	var ran, stored, busy atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		// Each worker is its own process, in effect: its own Client.
		client := redislock.New(rdb, redislock.WithPrefix("workerpool:"))
		defer client.Close()
		g, err := dedup.New(client.Locker(), client.Store(), dedup.WithHolder(fmt.Sprintf("worker-%d", w)),
			dedup.WithPrefix("charge:"+run+":"), dedup.WithRetry(lease.LinearBackoff(100*time.Millisecond)))
		if err != nil {
			log.Fatal(err)
		}
		wg.Go(func() {
			for id := range queue {
				res, err := g.Do(ctx, id, func(ctx context.Context, fence int64) ([]byte, error) {
					// The side effect, fenced: a stale run cannot overwrite it.
					key := "workerpool:" + run + ":charged:" + id
					if err := redislock.FencedSet(ctx, rdb, key, fmt.Sprintf("charged by worker-%d", w), fence, time.Hour); err != nil {
						return nil, err
					}
					if err := rdb.Incr(ctx, key+":count").Err(); err != nil {
						return nil, err
					}
					return []byte("receipt for " + id), nil
				})
				var running *dedup.InProgressError
				switch {
				case errors.As(err, &running): // only without WithRetry
					busy.Add(1)
					// Another worker runs it: deliver it again when that
					// run's lease would end, not at once in a loop.
					time.AfterFunc(running.RetryAfter, func() { queue <- id })
					continue
				case err != nil:
					log.Printf("worker-%d: %s: %v (redelivering)", w, id, err)
					queue <- id
					continue
				case res.Ran:
					ran.Add(1)
				default:
					stored.Add(1)
				}
				pending.Done()
			}
		})
	}
	wg.Wait()

	twice := 0
	for i := range orders {
		key := fmt.Sprintf("workerpool:%s:charged:order-%d:count", run, i)
		if n, err := rdb.Get(ctx, key).Int(); err != nil || n != 1 {
			twice++
			log.Printf("order-%d charged %d times (%v)", i, n, err)
		}
	}
	fmt.Printf("%d deliveries of %d orders on %d workers: %d runs, %d answered from the record, %d redelivered while running\n",
		orders*deliveries, orders, workers, ran.Load(), stored.Load(), busy.Load())
	if twice > 0 {
		log.Fatalf("%d orders were not charged exactly once", twice)
	}
	fmt.Println("every order was charged exactly once")
}
