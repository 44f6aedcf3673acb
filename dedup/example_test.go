package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

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

// A worker loop on a queue that redelivers: a job that another worker is
// running goes back to the queue for the InProgressError's RetryAfter, the
// running worker's lease left, instead of coming straight back in a loop.
// By then the job is done (the repeat gets its outcome), still running
// (another RetryAfter), or its worker crashed and the job runs here.
func ExampleInProgressError() {
	client, done := newRedis()
	defer done()
	ctx := context.Background()
	worker := func(name string) *dedup.Group {
		g, err := dedup.New(client.Locker(), client.Store(), dedup.WithHolder(name))
		if err != nil {
			log.Fatal(err)
		}
		return g
	}
	// handle processes one delivery of the job id and returns when the
	// queue should deliver it again, 0 for never (acknowledge it). A
	// worker loop calls it for every message:
	//
	//	for msg := range deliveries {
	//		if after := handle(g, msg.ID, jobOf(msg)); after > 0 {
	//			msg.Redeliver(after) // a visibility timeout, a retry-at...
	//		} else {
	//			msg.Ack()
	//		}
	//	}
	handle := func(g *dedup.Group, id string, job dedup.Job) time.Duration {
		res, err := g.Do(ctx, id, job)
		var busy *dedup.InProgressError
		switch {
		case errors.As(err, &busy):
			fmt.Printf("%s runs on %s: deliver again in %v\n", id, busy.Holder, busy.RetryAfter.Round(time.Second))
			return busy.RetryAfter
		case err != nil:
			fmt.Printf("%s failed, deliver again: %v\n", id, err)
			return time.Second // the queue's own backoff
		}
		fmt.Printf("%s done: %s (ran here: %v)\n", id, res.Value, res.Ran)
		return 0
	}

	w1, w2 := worker("worker-1"), worker("worker-2")
	running, finish, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { // worker-1 got the first delivery
		defer close(finished)
		handle(w1, "invoice-42", func(context.Context, int64) ([]byte, error) {
			close(running)
			<-finish
			return []byte("sent"), nil
		})
	}()
	<-running
	send := func(context.Context, int64) ([]byte, error) { return []byte("sent again"), nil }
	handle(w2, "invoice-42", send) // a second delivery, while worker-1 runs the job
	close(finish)
	<-finished
	handle(w2, "invoice-42", send) // delivered again after RetryAfter
	// Output:
	// invoice-42 runs on worker-1: deliver again in 10s
	// invoice-42 done: sent (ran here: true)
	// invoice-42 done: sent (ran here: false)
}
