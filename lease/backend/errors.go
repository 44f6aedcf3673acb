package backend

import "github.com/redislock-go/redislock/lease/internal/errs"

// Invalid returns an error matching lease.ErrInvalidArgument with the
// formatted message, for backends and patterns that check their own input.
func Invalid(format string, args ...any) error { return errs.Invalid(format, args...) }

// Join returns an error matching both a and b, with a one-line message
// "a: b" that says each thing once (b's "redislock: " prefix is left out,
// and all of b when a's message already ends with it); either may be nil.
// Backends use it to keep a context's error next to their own
// (lease.ErrNotObtained and ctx.Err(), say).
func Join(a, b error) error { return errs.Join(a, b) }

// Wrap returns an error matching err whose one-line message puts what was
// being done in front of err's: "redislock: <format>: <err>", with err's
// own "redislock: " prefix left out, so that a wrapped error of this
// library does not say "redislock: redislock:".
func Wrap(err error, format string, args ...any) error { return errs.Wrap(err, format, args...) }
