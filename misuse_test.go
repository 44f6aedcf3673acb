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
