package stampede_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/stampede"
)

// A web handler's cache entry, filled once across every process that
// shares the Redis; later calls read it.
func Example() {
	mr, _ := miniredis.Run() // stands for your Redis
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	client := redislock.New(rdb)
	defer client.Close()

	g, err := stampede.New(client.Locker(), client.Store())
	if err != nil {
		panic(err)
	}
	defer g.Close()

	ctx := context.Background()
	price := func(ctx context.Context) ([]byte, error) {
		fmt.Println("computing the price") // the slow query, run once
		return []byte("9.99"), nil
	}
	for range 3 {
		v, err := g.Do(ctx, "price:42", time.Minute, price)
		fmt.Println(string(v), err)
	}
	// Output:
	// computing the price
	// 9.99 <nil>
	// 9.99 <nil>
	// 9.99 <nil>
}

// Negative caching: a fill that reports ErrMissing is remembered for the
// negative TTL, so that requests for a missing row do not reach the
// database each time.
func Example_negativeCaching() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	client := redislock.New(rdb)
	defer client.Close()

	g, _ := stampede.New(client.Locker(), client.Store(), stampede.WithNegativeTTL(30*time.Second))
	defer g.Close()
	user := func(ctx context.Context) ([]byte, error) {
		fmt.Println("querying user 7")
		return nil, fmt.Errorf("user 7: %w", stampede.ErrMissing) // e.g. on sql.ErrNoRows
	}
	for range 2 {
		_, err := g.Do(context.Background(), "user:7", time.Minute, user)
		fmt.Println(errors.Is(err, stampede.ErrMissing))
	}
	// Output:
	// querying user 7
	// true
	// true
}

// Stale-while-revalidate: within the last 10 s of its TTL a value is
// still served, and one process across the fleet refreshes it in the
// background.
func Example_earlyRefresh() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	client := redislock.New(rdb)
	defer client.Close()

	g, _ := stampede.New(client.Locker(), client.Store(),
		stampede.WithEarlyRefresh(10*time.Second),
		stampede.WithErrorHandler(func(key string, err error) { fmt.Println("refresh of", key, "failed:", err) }))
	defer g.Close()
	v, _ := g.Do(context.Background(), "front-page", time.Minute, func(ctx context.Context) ([]byte, error) {
		return []byte("<html>...</html>"), nil
	})
	fmt.Println(len(v))
	// Output: 16
}
