package pglock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/pglock"
)

// Cleanup deletes lease rows released or expired longer than the retention
// ago and expired records, at most limit per table per pass, and never a
// held lease or a live record.
func TestCleanup(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	ctx := ctxFor(t)
	c := newClient(t, newPool(t), table, pglock.WithRetention(time.Second))
	held, err := c.Obtain(ctx, "held", time.Minute)
	require.NoError(t, err)
	defer held.Release(ctx)
	for _, k := range []string{"old1", "old2", "old3"} {
		l, err := c.Obtain(ctx, k, time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	fresh, err := c.Obtain(ctx, "fresh", time.Minute)
	require.NoError(t, err)
	require.NoError(t, fresh.Release(ctx))
	// Age the released rows past the retention, as time would.
	_, err = admin.Exec(ctx, `UPDATE `+table+` SET expires_at = expires_at - interval '1 minute' WHERE name LIKE 'old%'`)
	require.NoError(t, err)
	st := c.Store()
	require.NoError(t, st.Put(ctx, "live", []byte("v"), 1, 0))
	require.NoError(t, st.Put(ctx, "gone", []byte("v"), 1, time.Millisecond))
	_, err = admin.Exec(ctx, `UPDATE `+table+`_records SET expires_at = clock_timestamp() - interval '1 second' WHERE name = 'gone'`)
	require.NoError(t, err)
	s, err := c.Cleanup(ctx, 2)
	require.NoError(t, err, "first pass: %+v; want 2 leases (the limit) and 1 record", s)
	require.Equal(t, int64(2), s.Leases, "first pass: %+v, %v; want 2 leases (the limit) and 1 record", s, err)
	require.Equal(t, int64(1), s.Records, "first pass: %+v, %v; want 2 leases (the limit) and 1 record", s, err)
	// The Cleaner's first pass takes the third old row.
	passes := make(chan pglock.Swept, 1)
	cl, err := c.StartCleanup(pglock.WithCleanupInterval(time.Hour), pglock.WithCleanupReport(func(s pglock.Swept, err error) {
		assert.NoError(t, err, "pass")
		passes <- s
	}))
	require.NoError(t, err)
	if s := <-passes; s.Leases != 1 || s.Records != 0 {
		t.Fatalf("Cleaner's pass: %+v, want the last old lease row", s)
	}
	require.NoError(t, cl.Close())
	<-cl.Done()
	var names []string
	rows, err := admin.Query(ctx, `SELECT name FROM `+table+` ORDER BY name`)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		names = append(names, n)
	}
	require.Len(t, names, 2, "rows left: %v, want fresh (within the retention) and held", names)
	require.Equal(t, "fresh", names[0], "rows left: %v, want fresh (within the retention) and held", names)
	require.Equal(t, "held", names[1], "rows left: %v, want fresh (within the retention) and held", names)
	if info, err := c.Inspect(ctx, "held"); err != nil || !info.Held {
		t.Fatalf("held lease after clean-up: %+v, %v", info, err)
	}
	_, err = st.Get(ctx, "live")
	require.NoError(t, err, "live record after clean-up")
	// Client.Close stops a Cleaner it started.
	cl2, err := c.StartCleanup()
	require.NoError(t, err)
	_ = c.Close()
	select {
	case <-cl2.Done():
	case <-ctx.Done():
		t.Fatal("Client.Close did not stop its Cleaner")
	}
}
