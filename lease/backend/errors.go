package backend

import "github.com/redislock-go/redislock/lease/internal/errs"

// Invalid returns an error matching lease.ErrInvalidArgument with the
// formatted message, for backends and patterns that check their own input.
func Invalid(format string, args ...any) error { return errs.Invalid(format, args...) }

// Join returns an error matching both a and b, with a one-line message
// "a: b"; either may be nil. Backends use it to keep a context's error
// next to their own (lease.ErrNotObtained and ctx.Err(), say).
func Join(a, b error) error { return errs.Join(a, b) }
