package leader_test

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/leader"
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

// Run campaigns, runs the leader's work with the term's fence, and gives
// leadership up when the work returns. Call it in a loop to stay a
// candidate.
func Example() {
	client, done := newRedis()
	defer done()
	e, err := leader.New(client.Locker(), "report-scheduler", leader.WithHolder("worker-1"))
	if err != nil {
		log.Fatal(err)
	}
	err = e.Run(context.Background(), leader.Callbacks{
		OnStartedLeading: func(ctx context.Context, t *leader.Term) error {
			// The leader's work: until ctx ends, with t.Fence() on every
			// write. Here it looks who leads and returns.
			info, err := e.Leader(ctx)
			fmt.Println("leader:", info.Identity, "term matches:", info.Term == t.Fence())
			return err
		},
		OnStoppedLeading: func() { fmt.Println("stopped leading") },
	})
	fmt.Println("Run:", err)
	// Output:
	// leader: worker-1 term matches: true
	// stopped leading
	// Run: <nil>
}

// Campaign and Resign, apart: the waiting candidate wins as soon as the
// leader resigns, with a higher term.
func ExampleElection_Campaign() {
	client, done := newRedis()
	defer done()
	ctx := context.Background()
	a, _ := leader.New(client.Locker(), "billing", leader.WithHolder("a"))
	b, _ := leader.New(client.Locker(), "billing", leader.WithHolder("b"))

	ta, err := a.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	won := make(chan *leader.Term)
	go func() {
		tb, err := b.Campaign(ctx) // waits while a leads
		if err != nil {
			log.Fatal(err)
		}
		won <- tb
	}()
	fmt.Println("a leads")
	if err := ta.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	tb := <-won
	info, _ := b.Leader(ctx)
	fmt.Println(info.Identity, "leads; higher term:", tb.Fence() > ta.Fence())
	_ = tb.Resign(ctx)
	// Output:
	// a leads
	// b leads; higher term: true
}

// Observe reports who leads, then every change, until its ctx ends.
func ExampleElection_Observe() {
	client, done := newRedis()
	defer done()
	ctx, cancel := context.WithCancel(context.Background())
	a, _ := leader.New(client.Locker(), "billing", leader.WithHolder("a"))
	changes := a.Observe(ctx)
	fmt.Printf("%+v\n", <-changes) // nobody leads yet
	t, err := a.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println((<-changes).Identity) // a's own win is seen at once
	_ = t.Resign(ctx)
	cancel()
	for range changes { // closed when ctx ends
	}
	// Output:
	// {Identity: Term:0 TTL:0s}
	// a
}
