// Package lockbench is the scenario runner behind `go run ./bench`: it
// measures lock throughput, latency, hand-off, fairness and Redis cost for any
// library that has a Locker adapter, against real redis-server processes it
// starts itself, a Redis the user names, or (labelled as such) miniredis.
//
// The adapters for this module's library live here (see Ours); the adapters
// for other libraries live in the separate module bench/peers, so the library
// never depends on them.
package lockbench

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// ErrBusy is what an adapter returns when the lock is held by someone else
// and its waiting policy gave up. The runner counts it, and keeps waiting.
var ErrBusy = errors.New("lockbench: lock busy")

// Locker is one library in one configuration, bound to its Redis nodes.
type Locker interface {
	// Obtain takes key for ttl, waiting as the library's configured policy
	// does, at most until ctx ends. Contention is reported as ErrBusy.
	Obtain(ctx context.Context, key string, ttl time.Duration) (Held, error)
	// Close releases what the adapter owns (never the Redis clients).
	Close() error
}

// Held is a granted lock.
type Held interface {
	Release(ctx context.Context) error
}

// Renewer is implemented by lockers that can hold a lock with automatic
// renewal while fn runs: the library's own mechanism where it has one, or the
// loop a user of that library would have to write.
type Renewer interface {
	Hold(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) error) error
}

// Library describes one library configuration the runner can measure.
type Library struct {
	// Name is shown in results, e.g. "redislock linear-1ms".
	Name string
	// Primary marks the configuration used for scenarios where the waiting
	// policy does not matter (uncontended, renew): one per library family.
	Primary bool
	// Quorum is true if the library supports N-node (Redlock) mode.
	Quorum bool
	// Note says how the configuration was set up (shown in README/JSON).
	Note string
	// New binds the library to nodes: one node for single-instance mode,
	// N for quorum mode.
	New func(nodes []redis.UniversalClient) (Locker, error)
	// Dial, set instead of New, binds a library that brings its own Redis
	// client to the nodes at addrs (host:port); it reports the commands
	// that client sends to sent, as the run's go-redis clients count
	// theirs.
	Dial func(addrs []string, sent func(n int)) (Locker, error)
	// Postgres, set instead of New, binds a PostgreSQL library (run with
	// --backend postgres) to the run's pool and lease table.
	Postgres func(pool *pgxpool.Pool, table string) (Locker, error)
}
