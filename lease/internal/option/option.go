// Package option is what the options of package lease set: applied by
// lease itself (Hold, Run) and read by backends through lease/backend.
package option

import (
	"time"

	"github.com/redislock-go/redislock/lease/internal/errs"
)

// Retry is lease.RetryStrategy (an interface with the same method).
type Retry interface {
	Backoff(attempt int) (wait time.Duration, ok bool)
}

// Set is what the options of one call set.
type Set struct {
	Retry           Retry // nil: the backend's default
	Holder          string
	RefreshInterval time.Duration // 0: a third of the TTL

	err error // the first invalid value
}

// Fail records err (nil: none) unless an earlier option failed.
func (s *Set) Fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// Apply returns the Set that opts make, or the first invalid value's error.
func Apply[O ~func(*Set)](opts []O) (Set, error) {
	var s Set
	for _, opt := range opts {
		if opt != nil {
			opt(&s)
		}
	}
	if s.err != nil {
		return Set{}, s.err
	}
	return s, nil
}

// MaxHolderLen bounds the length of a holder identity.
const MaxHolderLen = 256

// CheckHolder refuses a holder identity longer than MaxHolderLen bytes.
func CheckHolder(id string) error {
	if len(id) > MaxHolderLen {
		return errs.Invalid("holder identity of %d bytes is longer than %d", len(id), MaxHolderLen)
	}
	return nil
}

// CheckRetry refuses a nil strategy, or one whose Validate method reports
// it invalid.
func CheckRetry(s Retry) error {
	if s == nil {
		return errs.Invalid("nil RetryStrategy")
	}
	if v, ok := s.(interface{ Validate() error }); ok {
		return v.Validate()
	}
	return nil
}
