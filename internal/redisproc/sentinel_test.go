package redisproc

import (
	"context"
	"testing"
	"time"
)

// The deployment is formed, a failover promotes the replica (which had the
// key), the old primary follows it, and a failover client finds the new
// primary.
func TestSentinel(t *testing.T) {
	t.Parallel()
	skipShort(t)
	need(t, "redis-server")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := StartSentinel(ctx, SentinelConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old, err := s.Primary(ctx)
	if err != nil || old != s.Servers()[0] {
		t.Fatalf("primary = %v, %v", old, err)
	}
	rdb := s.Client(nil)
	defer rdb.Close()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, "replica has the key", func(ctx context.Context) (bool, string) {
		return inSync(ctx, s.Servers()[1], old) == "", "replica behind"
	}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p == old || p != s.Servers()[1] {
		t.Fatalf("new primary %s, old %s", p.Addr(), old.Addr())
	}
	// The client learns of the switch from the sentinels; a write may hit
	// the old primary (READONLY) until then, which go-redis retries.
	if err := poll(ctx, "write through the failover client", func(ctx context.Context) (bool, string) {
		err := rdb.Set(ctx, "k2", "v2", 0).Err()
		return err == nil, "SET: " + errString(err)
	}); err != nil {
		t.Fatal(err)
	}
	if v, err := p.Do(ctx, "GET", "k"); err != nil || v != "v" {
		t.Fatalf("GET on the new primary = %v, %v", v, err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
