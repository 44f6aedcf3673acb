package pglock_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redislock-go/redislock/lease/leasetest"
)

// The Client passes the lease contract's conformance suite, as a Locker and
// as a Store, with the second client on a pool of its own (another process,
// in effect).
func TestLease(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		table := newTable(t)
		p := newPool(t)
		c := newClient(t, p, table)
		other := newClient(t, newPool(t), table)
		return leasetest.Env{Locker: c.Locker(), Other: other.Locker(), Store: c.Store(), Break: breakOn(t, p, table)}
	})
}

// The same suite with the statements sent the way a transaction pooler
// needs them: the simple protocol, no prepared statements, nothing kept in
// the session.
func TestLeaseSimpleProtocol(t *testing.T) {
	simple := func(cfg *pgxpool.Config) { cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol }
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		table := newTable(t)
		p := newPool(t, simple)
		c := newClient(t, p, table)
		other := newClient(t, newPool(t, simple), table)
		return leasetest.Env{Locker: c.Locker(), Other: other.Locker(), Store: c.Store(), Break: breakOn(t, p, table)}
	})
}
