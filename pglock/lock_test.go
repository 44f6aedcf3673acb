package pglock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redislock-go/redislock/internal/testkit"
	"github.com/redislock-go/redislock/lease"
	"github.com/redislock-go/redislock/pglock"
)

// offsetClock is the real clock moved by an offset: a client whose clock
// is wrong.
type offsetClock struct{ d time.Duration }

func (c offsetClock) Now() time.Time                                  { return time.Now().Add(c.d) }
func (c offsetClock) AfterFunc(d time.Duration, f func()) lease.Timer { return time.AfterFunc(d, f) }

// noTimes is a query tracer that fails t when a statement carries a time:
// every time must come from the database's clock.
type noTimes struct{ t *testing.T }

func (n noTimes) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	for _, a := range d.Args {
		if _, ok := a.(time.Time); ok {
			n.t.Errorf("statement sent a client time: %s %v", d.SQL, d.Args)
		}
	}
	return ctx
}
func (noTimes) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Clients whose clocks are an hour fast and an hour slow exclude each
// other, see the database's lease (Inspect, TTL), expire on the database's
// clock and renew under Run as usual; no statement carries a client time.
func TestClientClockOffsetChangesNothing(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	trace := func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = noTimes{t} }
	fast := newClient(t, newPool(t, trace), table, pglock.WithClock(offsetClock{time.Hour}))
	slow := newClient(t, newPool(t, trace), table, pglock.WithClock(offsetClock{-time.Hour}))
	ctx := ctxFor(t)
	for _, c := range []struct {
		name         string
		first, other *pglock.Client
	}{{"fast first", fast, slow}, {"slow first", slow, fast}} {
		key := "offset:" + c.name
		// A long lease, then set to end 100 ms ahead on the database's
		// clock: a short TTL would race these statements on a loaded
		// machine. An hour's offset would show in any of them.
		ttl := time.Minute
		l, err := c.first.Obtain(ctx, key, ttl)
		require.NoError(t, err, "%s: Obtain", c.name)
		_, err = c.other.Obtain(ctx, key, ttl)
		require.ErrorIs(t, err, pglock.ErrNotObtained, "%s: Obtain by the other client while held", c.name)
		for _, cl := range []*pglock.Client{c.first, c.other} {
			info, err := cl.Inspect(ctx, key)
			require.NoError(t, err, "%s: Inspect: %+v; want held with TTL in (0, %v]", c.name, info, ttl)
			require.True(t, info.Held, "%s: Inspect: %+v, %v; want held with TTL in (0, %v]", c.name, info, err, ttl)
			require.Greater(t, info.TTL, time.Duration(0), "%s: Inspect: %+v, %v; want held with TTL in (0, %v]", c.name, info, err, ttl)
			require.LessOrEqual(t, info.TTL, ttl, "%s: Inspect: %+v, %v; want held with TTL in (0, %v]", c.name, info, err, ttl)
		}
		if left, err := l.TTL(ctx); err != nil || left <= 0 || left > ttl {
			t.Fatalf("%s: TTL %v, %v", c.name, left, err)
		}
		endLeaseIn(t, admin, table, key, 100*time.Millisecond)
		untilFree(t, c.other, key, 5*time.Second)
		l2, err := c.other.Obtain(ctx, key, ttl)
		require.NoError(t, err, "%s: Obtain after expiry", c.name)
		require.ErrorIs(t, l.Release(ctx), pglock.ErrNotHeld, "%s: Release of the expired grant", c.name)
		require.NoError(t, l2.Release(ctx))
	}
	// Run renews on the client's (offset) clock: the lease is renewed and
	// no loss is reported. A minute's lease renewed every 20 ms: a late
	// renewal on a loaded machine is no loss, and an hour's offset would
	// be one at once.
	for _, c := range []*pglock.Client{fast, slow} {
		renewals := 0
		err := c.Run(ctx, "offset:run", time.Minute, func(ctx context.Context, l *pglock.Lock) error {
			for renewals < 4 {
				before := l.ValidUntil()
				// Polling for the renewal: no hook announces it.
				require.Eventually(t, func() bool {
					return !l.ValidUntil().Equal(before) || ctx.Err() != nil
				}, testkit.Bound, time.Millisecond, "a renewal")
				renewals++
			}
			return ctx.Err()
		}, pglock.WithRefreshInterval(20*time.Millisecond))
		require.NoError(t, err, "Run on an offset clock")
	}
}

// A release wakes a waiter whose backoff is far longer than the test:
// only the notification can have woken it.
func TestNotifyWakesWaiter(t *testing.T) {
	table := newTable(t)
	holder := newClient(t, newPool(t), table)
	waiterC := newClient(t, newPool(t), table)
	listening := make(chan struct{}, 1)
	pglock.SetTestHooks(waiterC, func(up bool) {
		if up {
			select {
			case listening <- struct{}{}:
			default:
			}
		}
	}, nil)
	ctx := ctxFor(t)
	key := "notified é ✓" // not ASCII: the server hashes the payload as Go does (UTF-8)
	l, err := holder.Obtain(ctx, key, time.Minute)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		// Backoff of an hour (bounded by ctx, 30 s): the listener's
		// connection wakes the first wait, the release the second.
		l, err := waiterC.Obtain(ctx, key, time.Minute, pglock.WithRetry(pglock.LinearBackoff(time.Hour)))
		if err == nil {
			_ = l.Release(ctx)
		}
		got <- err
	}()
	<-listening // the waiter is registered, the listener is up, and the row is marked wanted
	if info, err := holder.Inspect(ctx, key); err != nil || info.Waiters != 1 {
		t.Fatalf("Inspect with a waiter = %+v, %v; want Waiters 1", info, err)
	}
	require.NoError(t, l.Release(ctx))
	require.NoError(t, <-got, "waiter, want the lock after the release's notification")
}

// With the listening connection terminated, waiters fall back to their
// backoff; the listener comes back.
func TestNotifyListenerDown(t *testing.T) {
	table := newTable(t)
	admin := newPool(t)
	holder := newClient(t, newPool(t), table)
	waiterC := newClient(t, newPool(t), table)
	pids := make(chan uint32, 4)
	pglock.SetTestHooks(waiterC, nil, func(pid uint32) { pids <- pid })
	ctx := ctxFor(t)
	key := "listener-down"
	l, err := holder.Obtain(ctx, key, time.Minute)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := waiterC.Obtain(ctx, key, time.Minute, pglock.WithRetry(pglock.LinearBackoff(20*time.Millisecond)))
		if err == nil {
			_ = l.Release(ctx)
		}
		got <- err
	}()
	terminate(t, admin, int32(<-pids))
	require.NoError(t, l.Release(ctx))
	require.NoError(t, <-got, "waiter with its listener down")
	<-pids // reconnected
}

// Bad input is refused before any statement, with ErrInvalidArgument.
func TestInvalidInput(t *testing.T) {
	ctx := ctxFor(t)
	_, err := pglock.New(ctx, nil)
	require.ErrorIs(t, err, pglock.ErrInvalidArgument, "New(nil pool)")
	p := newPool(t)
	for _, name := range []string{"", "a.b.c", "1abc", "bad-name", "x;drop", strings.Repeat("a", 57), `"q"`} {
		_, err := pglock.New(ctx, p, pglock.WithTable(name))
		assert.ErrorIs(t, err, pglock.ErrInvalidArgument, "WithTable(%q)", name)
	}
	for name, opt := range map[string]pglock.ClientOption{
		"retention":  pglock.WithRetention(time.Millisecond),
		"session":    pglock.WithSessionConfig(nil),
		"drift":      pglock.WithDriftFactor(1),
		"holder NUL": pglock.WithHolder("a\x00b"),
		"retry":      pglock.WithRetry(nil),
	} {
		_, err := pglock.New(ctx, p, opt)
		assert.ErrorIs(t, err, pglock.ErrInvalidArgument, "New with a bad %s", name)
	}
	c := newClient(t, p, newTable(t))
	for _, key := range []string{"", "nul\x00", "\xff\xfe", strings.Repeat("k", pglock.MaxKeyLen+1)} {
		_, err := c.Obtain(ctx, key, time.Second)
		assert.ErrorIs(t, err, pglock.ErrInvalidArgument, "Obtain(%q)", key)
		_, err = c.ObtainAdvisory(ctx, []string{key})
		assert.ErrorIs(t, err, pglock.ErrInvalidArgument, "ObtainAdvisory(%q)", key)
	}
	_, err = c.ObtainAdvisory(ctx, nil)
	assert.ErrorIs(t, err, pglock.ErrInvalidArgument, "ObtainAdvisory(no keys)")
	assert.ErrorIs(t, c.RunTx(ctx, "k", time.Second, nil), pglock.ErrInvalidArgument, "RunTx(nil fn)")
	_, err = c.Cleanup(ctx, 0)
	assert.ErrorIs(t, err, pglock.ErrInvalidArgument, "Cleanup(0)")
	_, err = c.StartCleanup(pglock.WithCleanupInterval(0))
	assert.ErrorIs(t, err, pglock.ErrInvalidArgument, "StartCleanup(interval 0)")
	var nilLock *pglock.Lock
	assert.ErrorIs(t, nilLock.Release(ctx), pglock.ErrNotHeld, "nil Lock Release")
	_ = c.Close()
	_, err = c.Obtain(ctx, "k", time.Second)
	assert.ErrorIs(t, err, pglock.ErrClosed, "Obtain after Close")
}

// An unreachable database is its own error, never ErrNotObtained.
func TestUnreachable(t *testing.T) {
	needPostgres(t)
	cfg, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	defer p.Close()
	if _, err := pglock.New(ctxFor(t), p); err == nil || errors.Is(err, pglock.ErrNotObtained) {
		t.Fatalf("New on an unreachable database: %v", err)
	}
}
