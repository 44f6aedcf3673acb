package redislock

import (
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/backend"
)

// Locker returns the Client as a lease.Locker: the contract that the
// pattern packages (leader election, deduplication) and code meant for any
// backend are written against. opts are defaults for its Obtain calls, over
// the Client's own; a call's lease.WithRetry and lease.WithHolder override
// them. Its locks are *Lock values.
func (c *Client) Locker(opts ...Option) lease.Locker {
	return backend.NewLocker(backend.Client[Option, *Lock]{
		Obtain: c.Obtain, Inspect: c.Inspect, WithRetry: WithRetry, WithHolder: WithHolder,
	}, opts...)
}

var _ lease.Lock = (*Lock)(nil)
