package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/dedup"
)

// newRedis returns a Client on an embedded miniredis, for the examples;
// use your Redis instead.
func newRedis() (*redislock.Client, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	c := redislock.New(rdb)
	return c, func() {
		_ = c.Close()
		_ = rdb.Close()
		mr.Close()
	}
}

// A job delivered three times runs once; the repeats get its result.
func Example() {
	client, done := newRedis()
	defer done()
	g, err := dedup.New(client.Locker(), client.Store(), dedup.WithHolder("worker-1"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	sendInvoice := func(ctx context.Context, fence int64) ([]byte, error) {
		// Send fence with every write the job makes, so that a stale run
		// cannot write after a newer one.
		fmt.Println("sending invoice 42")
		return []byte("sent"), nil
	}
	for range 3 { // the queue delivered the job three times
		res, err := g.Do(ctx, "invoice-42", sendInvoice)
		switch {
		case errors.Is(err, dedup.ErrInProgress):
			fmt.Println("running elsewhere: redeliver later")
		case err != nil:
			fmt.Println("failed, retry:", err)
		default:
			fmt.Printf("%s (ran here: %v)\n", res.Value, res.Ran)
		}
	}
	// Output:
	// sending invoice 42
	// sent (ran here: true)
	// sent (ran here: false)
	// sent (ran here: false)
}

// In the UntilDoneOrFailed scope a failure is recorded too: its repeats
// get it back instead of running the job again.
func ExampleUntilDoneOrFailed() {
	client, done := newRedis()
	defer done()
	g, err := dedup.New(client.Locker(), client.Store(), dedup.WithScope(dedup.UntilDoneOrFailed))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	charge := func(context.Context, int64) ([]byte, error) { return nil, errors.New("card declined") }
	_, err = g.Do(ctx, "order-7", charge)
	fmt.Println("first:", err)
	_, err = g.Do(ctx, "order-7", charge)
	var failed *dedup.FailedError
	if errors.As(err, &failed) {
		fmt.Println("repeat, without a run:", failed.Msg)
	}
	// Output:
	// first: card declined
	// repeat, without a run: card declined
}
