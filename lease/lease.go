package lease

import (
	"context"
	"time"
)

// Lock is one grant of a lock: a lease on a key, identified by a random
// token, with a fencing token for the writes made under it. Its methods are
// safe for concurrent use. A Lock that renews itself is also a Keeper.
type Lock interface {
	// Key returns the key the caller asked for.
	Key() string
	// Token returns the grant's random ownership token, unique per grant.
	Token() string
	// Fence returns the grant's fencing token: greater than the fence of
	// every earlier grant of the key. Send it with every write to the
	// protected resource, and have the resource reject fences below the
	// newest it has accepted.
	Fence() int64
	// ValidUntil returns the end of the validity the backend last
	// confirmed, less clock drift, on the monotonic clock where the
	// backend's clock has one; the zero Time once the grant is known not to
	// be held.
	ValidUntil() time.Time
	// Refresh extends the lease to ttl from now, only while this grant
	// holds the lock; ErrNotHeld otherwise.
	Refresh(ctx context.Context, ttl time.Duration) error
	// Release gives the lock back, only while this grant holds it;
	// ErrNotHeld otherwise. It runs even after ctx was cancelled (bounded
	// by a short timeout of the backend's), keeping ctx's values.
	Release(ctx context.Context) error
}

// Locker obtains locks. Implementations are safe for concurrent use.
type Locker interface {
	// Obtain takes the lock on key for ttl. While another grant holds it,
	// Obtain retries as the WithRetry strategy says (default: one attempt)
	// and then returns an error matching ErrNotObtained, also matching
	// ctx.Err() when the context ended the wait. A backend that cannot be
	// reached returns its own error, never ErrNotObtained; bad input is an
	// error matching ErrInvalidArgument.
	Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (Lock, error)

	// Inspect reports who holds key, as the backend sees it now.
	Inspect(ctx context.Context, key string) (Info, error)
}

// Info is what Inspect reports about a key.
type Info struct {
	Key    string
	Held   bool
	Holder string        // the identity the grant recorded (WithHolder); "" if none
	Fence  int64         // the holder's fence; 0 when not held
	TTL    time.Duration // the holder's remaining lease on the backend; 0 when not held
	// Waiters is how many callers wait for the lock as far as the backend
	// knows: a lower bound, 0 when it knows of none (a backend that cannot
	// count them reports 1 for "someone waits").
	Waiters int
}

// Record is a value in a Store with the fence that wrote it.
type Record struct {
	Value []byte
	Fence int64
	TTL   time.Duration // remaining time to live; 0: no expiry
}

// Store keeps fenced records next to the locks of a backend: each write
// carries the writer's fence and is refused when the record holds a higher
// one, so a holder whose lease ended cannot overwrite what a newer holder
// wrote. Patterns keep their results in it (cached values, done-records).
type Store interface {
	// Put writes value at key with fence, unless the record there carries a
	// higher fence (an error matching ErrStaleFence). An equal fence, the
	// same grant writing again, is accepted. ttl > 0 expires the record
	// after ttl; ttl == 0 keeps it without expiry.
	Put(ctx context.Context, key string, value []byte, fence int64, ttl time.Duration) error
	// Get returns the record at key, or an error matching ErrNotFound.
	Get(ctx context.Context, key string) (Record, error)
	// Delete removes the record at key unless it carries a higher fence
	// than fence (ErrStaleFence). A missing record is not an error.
	Delete(ctx context.Context, key string, fence int64) error
}
