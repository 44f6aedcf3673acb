package backend

import (
	"time"

	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/lease/internal/option"
)

// Options is what the lease.Options of a call set.
type Options struct {
	// Retry decides how Obtain waits while the lock is held by another;
	// nil leaves it to the backend's own default.
	Retry lease.RetryStrategy
	// Holder is the identity the grant records (lease.Info.Holder); ""
	// leaves it to the backend's own default.
	Holder string
	// RefreshInterval is how often Hold and Run renew the lease; 0 means a
	// third of the TTL.
	RefreshInterval time.Duration
}

// Apply returns the Options that opts set, or the first invalid value's
// error (matching lease.ErrInvalidArgument).
func Apply(opts []lease.Option) (Options, error) {
	s, err := option.Apply(opts)
	if err != nil {
		return Options{}, err
	}
	return Options{Retry: s.Retry, Holder: s.Holder, RefreshInterval: s.RefreshInterval}, nil
}

// CheckHolder returns an error matching lease.ErrInvalidArgument for a
// holder identity longer than lease.MaxHolderLen bytes.
func CheckHolder(id string) error { return option.CheckHolder(id) }

// CheckRetry returns an error matching lease.ErrInvalidArgument when s is
// nil or its Validate method reports it invalid.
func CheckRetry(s lease.RetryStrategy) error { return option.CheckRetry(s) }
