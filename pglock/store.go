package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redislock-go/redislock/lease"
)

// Store returns the Client's fenced records as a lease.Store: the records
// table ("<table>_records": name, value bytea, fence, expires_at), where
// the pattern packages keep their results. Each Put and Delete is one
// statement that compares the fence with the record's; expiry is on the
// database's clock. An expired record refuses nothing and reads as
// missing; Cleanup deletes it. A Put or Delete whose wait for a record
// locked by another transaction was ended by a lock or statement timeout
// returns an error matching ErrRowLocked, having written nothing.
func (c *Client) Store() lease.Store { return recordStore{c} }

type recordStore struct{ c *Client }

var _ lease.Store = recordStore{}

func checkRecord(key string, fence int64, ttl time.Duration) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if fence <= 0 {
		return lease.Invalid("fence %d must be positive", fence)
	}
	if ttl < 0 || ttl > 0 && ttl < time.Millisecond {
		return lease.Invalid("record TTL %v must be 0 or at least 1ms", ttl)
	}
	return nil
}

func staleErr(fence int64, newest *int64) error {
	if newest == nil {
		return fmt.Errorf("%w: fence %d is below the record's", lease.ErrStaleFence, fence)
	}
	return fmt.Errorf("%w: fence %d is below %d", lease.ErrStaleFence, fence, *newest)
}

func (s recordStore) Put(ctx context.Context, key string, value []byte, fence int64, ttl time.Duration) error {
	if err := checkRecord(key, fence, ttl); err != nil {
		return err
	}
	if _, err := s.c.callOptions(nil); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	var written int64
	var newest *int64
	err := s.c.pool.QueryRow(ctx, s.c.sql.put, key, value, fence, ttl.Milliseconds()).Scan(&written, &newest)
	switch {
	case err != nil:
		return s.c.opErr(ctx, "put", key, err)
	case written == 0:
		return staleErr(fence, newest)
	}
	return nil
}

func (s recordStore) Get(ctx context.Context, key string) (lease.Record, error) {
	if err := checkKey(key); err != nil {
		return lease.Record{}, err
	}
	if _, err := s.c.callOptions(nil); err != nil {
		return lease.Record{}, err
	}
	var r lease.Record
	var us int64
	err := s.c.pool.QueryRow(ctx, s.c.sql.get, key).Scan(&r.Value, &r.Fence, &us)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return lease.Record{}, lease.ErrNotFound
	case err != nil:
		return lease.Record{}, fmt.Errorf("redislock: get %q: %w", key, err)
	}
	r.TTL = time.Duration(us) * time.Microsecond
	return r, nil
}

func (s recordStore) Delete(ctx context.Context, key string, fence int64) error {
	if err := checkRecord(key, fence, 0); err != nil {
		return err
	}
	if _, err := s.c.callOptions(nil); err != nil {
		return err
	}
	var deleted int64
	var newest *int64
	err := s.c.pool.QueryRow(ctx, s.c.sql.del, key, fence).Scan(&deleted, &newest)
	switch {
	case err != nil:
		return s.c.opErr(ctx, "delete", key, err)
	case deleted == 0 && newest != nil && *newest > fence:
		return staleErr(fence, newest)
	}
	return nil
}
