package pglock_test

import (
	"testing"
	"time"

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
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	for _, k := range []string{"old1", "old2", "old3"} {
		l, err := c.Obtain(ctx, k, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fresh, err := c.Obtain(ctx, "fresh", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Age the released rows past the retention, as time would.
	if _, err := admin.Exec(ctx, `UPDATE `+table+` SET expires_at = expires_at - interval '1 minute' WHERE name LIKE 'old%'`); err != nil {
		t.Fatal(err)
	}
	st := c.Store()
	if err := st.Put(ctx, "live", []byte("v"), 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "gone", []byte("v"), 1, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `UPDATE `+table+`_records SET expires_at = clock_timestamp() - interval '1 second' WHERE name = 'gone'`); err != nil {
		t.Fatal(err)
	}
	s, err := c.Cleanup(ctx, 2)
	if err != nil || s.Leases != 2 || s.Records != 1 {
		t.Fatalf("first pass: %+v, %v; want 2 leases (the limit) and 1 record", s, err)
	}
	// The Cleaner's first pass takes the third old row.
	passes := make(chan pglock.Swept, 1)
	cl, err := c.StartCleanup(pglock.WithCleanupInterval(time.Hour), pglock.WithCleanupReport(func(s pglock.Swept, err error) {
		if err != nil {
			t.Errorf("pass: %v", err)
		}
		passes <- s
	}))
	if err != nil {
		t.Fatal(err)
	}
	if s := <-passes; s.Leases != 1 || s.Records != 0 {
		t.Fatalf("Cleaner's pass: %+v, want the last old lease row", s)
	}
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	<-cl.Done()
	var names []string
	rows, err := admin.Query(ctx, `SELECT name FROM `+table+` ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		names = append(names, n)
	}
	if len(names) != 2 || names[0] != "fresh" || names[1] != "held" {
		t.Fatalf("rows left: %v, want fresh (within the retention) and held", names)
	}
	if info, err := c.Inspect(ctx, "held"); err != nil || !info.Held {
		t.Fatalf("held lease after clean-up: %+v, %v", info, err)
	}
	if _, err := st.Get(ctx, "live"); err != nil {
		t.Fatalf("live record after clean-up: %v", err)
	}
	// Client.Close stops a Cleaner it started.
	cl2, err := c.StartCleanup()
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	select {
	case <-cl2.Done():
	case <-ctx.Done():
		t.Fatal("Client.Close did not stop its Cleaner")
	}
}
