package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/semaphore"
)

// At most two transcoding jobs at once across every worker process: each
// job holds a permit, renewed while it runs, and writes its output with
// the permit's fence, checked per slot.
func Example() {
	mr, _ := miniredis.Run() // stands for your Redis
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	sem, err := semaphore.New(rdb, "transcoders", 2, semaphore.WithHolder("worker-1"))
	if err != nil {
		panic(err)
	}
	defer sem.Close()

	ctx := context.Background()
	p, err := sem.Acquire(ctx, 10*time.Second) // waits while both slots are taken
	if err != nil {
		panic(err)
	}
	err = lease.RunLock(ctx, p, 10*time.Second, func(ctx context.Context) error {
		// ctx ends if the permit is lost. Writes carry the fence of
		// the permit's slot:
		key := fmt.Sprintf("transcode:output:slot%d", p.Slot())
		return redislock.FencedSet(ctx, rdb, key, "done", p.Fence(), time.Hour)
	})
	fmt.Println("job:", err)

	info, _ := sem.Inspect(ctx)
	fmt.Println("holders after the job:", len(info.Holders))
	// Output:
	// job: <nil>
	// holders after the job: 0
}

// TryAcquire does not wait: a full semaphore answers ErrNotObtained.
func ExampleSemaphore_TryAcquire() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	sem, _ := semaphore.New(rdb, "exports", 1)
	defer sem.Close()

	ctx := context.Background()
	p, _ := sem.TryAcquire(ctx, time.Minute)
	defer p.Release(ctx)
	_, err := sem.TryAcquire(ctx, time.Minute)
	fmt.Println(errors.Is(err, lease.ErrNotObtained))
	// Output: true
}

// Inspect lists who holds the slots.
func ExampleSemaphore_Inspect() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	sem, _ := semaphore.New(rdb, "imports", 3, semaphore.WithHolder("host-a:4711"))
	defer sem.Close()

	ctx := context.Background()
	p, _ := sem.Acquire(ctx, time.Minute)
	defer p.Release(ctx)
	info, _ := sem.Inspect(ctx)
	for _, h := range info.Holders {
		fmt.Printf("slot %d held by %s\n", h.Slot, h.Holder)
	}
	// Output: slot 0 held by host-a:4711
}
