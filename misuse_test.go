package redislock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redislock-go/redislock"
	"github.com/redislock-go/redislock/internal/redistest"
)

// A typed nil (a nil *redis.Client in a non-nil interface) is a nil client:
// every call of New's Client is ErrInvalidArgument, NewQuorum refuses it,
// and nothing panics.
func TestTypedNilClients(t *testing.T) {
	srv := redistest.Start(t)
	good := []redis.UniversalClient{srv.Client(nil), srv.Client(nil)}
	ctx := ctxT(t, 10*time.Second)
	fn := func(context.Context, *redislock.Lock) error { return nil }
	fnMulti := func(context.Context, *redislock.MultiLock) error { return nil }
	for name, rdb := range map[string]redis.UniversalClient{
		"client":  (*redis.Client)(nil),
		"cluster": (*redis.ClusterClient)(nil),
		"ring":    (*redis.Ring)(nil),
	} {
		t.Run(name, func(t *testing.T) {
			c := redislock.New(rdb)
			calls := map[string]func() error{
				"Obtain":      func() error { _, err := c.Obtain(ctx, "k", time.Second); return err },
				"ObtainMulti": func() error { _, err := c.ObtainMulti(ctx, []string{"a", "b"}, time.Second); return err },
				"Run":         func() error { return c.Run(ctx, "k", time.Second, fn) },
				"RunMulti":    func() error { return c.RunMulti(ctx, []string{"a", "b"}, time.Second, fnMulti) },
				"Inspect":     func() error { _, err := c.Inspect(ctx, "k"); return err },
				"Store.Put":   func() error { return c.Store().Put(ctx, "k", []byte("v"), 1, 0) },
				"Store.Get":   func() error { _, err := c.Store().Get(ctx, "k"); return err },
				"Locker":      func() error { _, err := c.Locker().Obtain(ctx, "k", time.Second); return err },
				"NewQuorum": func() error {
					_, err := redislock.NewQuorum([]redis.UniversalClient{good[0], rdb, good[1]})
					return err
				},
				"FencedSet": func() error { return redislock.FencedSet(ctx, rdb, "r", "v", 1, 0) },
				"FencedGet": func() error { _, _, err := redislock.FencedGet(ctx, rdb, "r"); return err },
			}
			for call, f := range calls {
				t.Run(call, func(t *testing.T) {
					if err := noPanic(f); !errors.Is(err, redislock.ErrInvalidArgument) {
						t.Fatalf("got %v, want ErrInvalidArgument", err)
					}
				})
			}
			if err := noPanic(c.Close); err != nil {
				t.Fatalf("Close: %v", err)
			}
		})
	}
}

// noPanic runs f and returns its error, or the panic as an error.
func noPanic(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errors.New("panic: " + strings.Split(strings.TrimSpace(toString(p)), "\n")[0])
		}
	}()
	return f()
}

func toString(p any) string {
	if e, ok := p.(error); ok {
		return e.Error()
	}
	if s, ok := p.(string); ok {
		return s
	}
	return "non-error panic"
}

// An option the Client's mode cannot honour is refused by the constructor,
// not by every call later.
func TestConstructorRefusesWhatTheModeCannotHonour(t *testing.T) {
	var rdbs []redis.UniversalClient
	for _, s := range redistest.StartN(t, 3) {
		rdbs = append(rdbs, s.Client(nil))
	}
	for name, opt := range map[string]redislock.Option{
		"WithFair":     redislock.WithFair(true),
		"WithReplicas": redislock.WithReplicas(1, time.Second),
	} {
		c, err := redislock.NewQuorum(rdbs, opt)
		if !errors.Is(err, redislock.ErrInvalidArgument) || c != nil {
			if c != nil {
				_ = c.Close()
			}
			t.Errorf("NewQuorum(%s) = %v, %v, want ErrInvalidArgument", name, c, err)
		}
	}
}

// Obtain and Run (ObtainMulti and RunMulti) judge a call's TTL and options
// alike: what one refuses as invalid, so does the other.
func TestObtainAndRunValidateAlike(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(nil))
	ctx := ctxT(t, 10*time.Second)
	cases := []struct {
		ttl  time.Duration
		opts []redislock.Option
	}{
		{time.Second, []redislock.Option{redislock.WithRefreshInterval(2 * time.Second)}},
		{time.Second, []redislock.Option{redislock.WithRefreshInterval(time.Second)}},
		{time.Second, []redislock.Option{redislock.WithRefreshInterval(985 * time.Millisecond)}},
		{time.Second, []redislock.Option{redislock.WithRefreshInterval(500 * time.Millisecond)}},
		{10 * time.Millisecond, []redislock.Option{redislock.WithDriftFactor(0.5)}},
		{3 * time.Millisecond, nil},
		{4 * time.Millisecond, nil},
		{time.Second, nil},
	}
	for _, tc := range cases {
		obtained := func() error {
			l, err := c.Obtain(ctx, "alike", tc.ttl, tc.opts...)
			if err == nil {
				_ = l.Release(ctx)
			}
			return err
		}()
		ran := c.Run(ctx, "alike", tc.ttl, func(context.Context, *redislock.Lock) error { return nil }, tc.opts...)
		multi := func() error {
			m, err := c.ObtainMulti(ctx, []string{"alike-a", "alike-b"}, tc.ttl, tc.opts...)
			if err == nil {
				_ = m.Release(ctx)
			}
			return err
		}()
		ranMulti := c.RunMulti(ctx, []string{"alike-a", "alike-b"}, tc.ttl, func(context.Context, *redislock.MultiLock) error { return nil }, tc.opts...)
		verdicts := []bool{}
		for _, err := range []error{obtained, ran, multi, ranMulti} {
			verdicts = append(verdicts, errors.Is(err, redislock.ErrInvalidArgument))
		}
		for _, v := range verdicts[1:] {
			if v != verdicts[0] {
				t.Errorf("TTL %v with %d options: Obtain %v, Run %v, ObtainMulti %v, RunMulti %v: not alike",
					tc.ttl, len(tc.opts), obtained, ran, multi, ranMulti)
				break
			}
		}
	}
}

// A TTL that leaves less validity than Redis' own expiry precision (1 ms)
// is refused, and the error says it is too short.
func TestTooShortTTLSaysSo(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(nil))
	ctx := ctxT(t, 10*time.Second)
	l, err := c.Obtain(ctx, "short", 3*time.Millisecond)
	if err == nil {
		_ = l.Release(ctx)
	}
	if !errors.Is(err, redislock.ErrInvalidArgument) || !strings.Contains(err.Error(), "too short") {
		t.Fatalf("Obtain with a 3ms TTL = %v, want ErrInvalidArgument saying the TTL is too short", err)
	}
}
