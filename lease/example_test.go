package lease_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/leasetest"
)

// Holding a lock outside a callback: Hold renews it in the background and
// closes Done the moment it is lost. The in-memory Locker stands in for any
// backend (redislock.Client.Locker, pglock).
func ExampleHold() {
	var locker lease.Locker = leasetest.NewMemory()
	ctx := context.Background()

	l, err := locker.Obtain(ctx, "partition:7", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	h, err := lease.Hold(ctx, l, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(ctx)

	select {
	case <-h.Done(): // lost: stop working on the partition
		fmt.Println("lost:", h.Err())
	default:
		fmt.Println("holding partition:7 with fence", l.Fence())
	}
	// Output: holding partition:7 with fence 1
}
