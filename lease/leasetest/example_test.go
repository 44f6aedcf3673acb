package leasetest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redislock-go/redislock/lease/leasetest"
)

// Code built on locks tested without Redis and without sleeping: the
// in-memory Locker on a fake clock.
func ExampleFakeClock() {
	clock := leasetest.NewFakeClock(time.Time{})
	locker := leasetest.NewMemory(leasetest.WithClock(clock))
	ctx := context.Background()

	first, _ := locker.Obtain(ctx, "job", time.Second)
	_, err := locker.Obtain(ctx, "job", time.Second)
	fmt.Println(err)
	clock.Advance(time.Second) // the first lease ends
	second, _ := locker.Obtain(ctx, "job", time.Second)
	fmt.Println(second.Fence() > first.Fence())
	// Output:
	// redislock: not obtained, held by another
	// true
}
